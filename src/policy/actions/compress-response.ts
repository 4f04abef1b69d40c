import { quote } from '../../core/quote.js';
import type { ActionSpec, CompressionEncoding } from './types.js';

const ALGORITHMS = ['br', 'compress', 'deflate', 'gzip'] as const;
type Algorithm = (typeof ALGORITHMS)[number];
/** Preferred first when the client rates several equally. `compress` (LZW) has no encoder here. */
const PREFERENCE: readonly CompressionEncoding[] = ['br', 'gzip', 'deflate'];

/**
 * The encoding to use for a client that sent `acceptEncoding`, among `offered`: the one the
 * client rates highest (q-values; `*` covers the rest; q=0 refuses), ties broken br > gzip >
 * deflate. Undefined when none is acceptable.
 * @example chooseEncoding('gzip, deflate;q=0.5, br;q=0', ['br', 'gzip', 'deflate']) // 'gzip'
 */
export function chooseEncoding(
  acceptEncoding: string | undefined,
  offered: readonly CompressionEncoding[],
): CompressionEncoding | undefined {
  if (!acceptEncoding) return undefined;
  const q = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [token, ...params] = part.trim().toLowerCase().split(';');
    if (!token) continue;
    let weight = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) weight = Number(m[1]);
    }
    q.set(token.trim(), Number.isFinite(weight) ? weight : 0);
  }
  let best: CompressionEncoding | undefined;
  let bestQ = 0;
  for (const encoding of PREFERENCE) {
    if (!offered.includes(encoding)) continue;
    const weight = q.get(encoding) ?? q.get('*') ?? 0;
    if (weight > bestQ) [best, bestQ] = [encoding, weight];
  }
  return best;
}

/**
 * `compress-response`: compress the response body with the best of `algorithms` (default all)
 * the client accepts. The engine decides and sets the headers (`content-encoding`, `vary`, drops
 * `content-length`); the ingress pipes the body through the named zlib stream. Responses that
 * are already encoded, have no body (204, 304, HEAD) or say `cache-control: no-transform` are
 * left alone.
 * @example { type: 'compress-response', config: { algorithms: ['gzip', 'br'] } }
 */
export const compressResponseAction: ActionSpec = {
  type: 'compress-response',
  phases: ['on_http_response'],
  termination: 'never',
  configKeys: ['algorithms'],
  compile(config) {
    const list = config.stringList('algorithms', { min: 1, max: 4 }) ?? [...ALGORITHMS];
    list.forEach((a, i) => {
      if (!(ALGORITHMS as readonly string[]).includes(a)) {
        config.fail(
          `algorithms[${i}]`,
          `must be one of ${ALGORITHMS.join(', ')}, not ${quote(String(a), '"')}`,
        );
      }
    });
    const offered = PREFERENCE.filter((e) => (list as Algorithm[]).includes(e));
    return {
      alwaysTerminates: false,
      run(c) {
        const { req, res } = c.activation;
        if (!req || !res || c.compress) return undefined;
        const status = Number(res.status_code);
        if (status === 204 || status === 304 || req.method === 'HEAD') return undefined;
        const existing = res.header('content-encoding')[0];
        if (existing && existing.toLowerCase() !== 'identity') {
          c.setActionResult('compress', { already_compressed: true, negotiated_algorithm: '' });
          return undefined;
        }
        if (res.header('cache-control').some((v) => /no-transform/i.test(v))) return undefined;
        const encoding = chooseEncoding(req.header('accept-encoding').join(','), offered);
        if (!encoding) return undefined;
        c.compress = encoding;
        c.setActionResult('compress', {
          already_compressed: false,
          negotiated_algorithm: encoding,
        });
        const edits = c.headers!;
        edits.remove('content-length');
        edits.remove('content-encoding');
        edits.add('content-encoding', encoding);
        if (!res.header('vary').some((v) => /accept-encoding|\*/i.test(v)))
          edits.add('vary', 'Accept-Encoding');
        c.publishHeaders();
        return undefined;
      },
    };
  },
};
