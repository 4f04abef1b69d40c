import { hostOfHostPort } from '../../core/host-port.js';
import { quote } from '../../core/quote.js';
import type { ActionSpec, InternalTarget } from './types.js';

/** Internal endpoints' names end with this; a URL elsewhere is public and refused. */
const INTERNAL_SUFFIX = '.internal';

/**
 * The host (and port) a forward-internal URL names, lowercased: `https://API.internal/x` →
 * `api.internal`, `tcp://db.internal:5432` → `db.internal:5432`; undefined when it is no URL.
 * @example internalTarget('https://api.internal') // { scheme: 'https', key: 'api.internal', host: 'api.internal' }
 */
export function internalTarget(url: string): InternalTarget | undefined {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]+)/i.exec(url.trim());
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase();
  const hostport = m[2]!.toLowerCase().replace(/\.$/, '');
  const host = hostOfHostPort(hostport);
  // http/https/tls internal endpoints are keyed by name alone; tcp ones by name and port.
  const key = scheme === 'tcp' ? hostport : host;
  return { scheme, key, host };
}

/**
 * `forward-internal`: hand the request (on_http_request) or connection (on_tcp_connect) to the
 * internal endpoint at `url` (`https://api.internal`, `tcp://db.internal:5432`), in the edge's
 * process. `binding` may only be `internal`. With `on_error: continue` a target that is not
 * online lets the next action run; with `halt` (default) the client gets an error. A URL outside
 * `.internal` is refused when the policy is saved; `${}` in it is rendered per request.
 * @example { type: 'forward-internal', config: { url: 'https://api.internal', on_error: 'continue' } }
 */
export const forwardInternalAction: ActionSpec = {
  type: 'forward-internal',
  phases: ['on_tcp_connect', 'on_http_request'],
  termination: 'conditionally',
  configKeys: ['url', 'binding', 'on_error'],
  compile(config, ctx) {
    const url = config.string('url', { required: true, example: '"https://api.internal"' })!;
    if (ctx.phase === 'on_tcp_connect' && (ctx.protocol === 'http' || ctx.protocol === 'https')) {
      config.fail('url', 'forwards HTTP endpoints per request: place it in on_http_request');
    }
    const templated = url.includes('${');
    // A URL without `${}` is parsed once, here; a rendered one once per run.
    let fixed: InternalTarget | undefined;
    if (!templated) {
      const target =
        internalTarget(url) ??
        config.fail('url', `must be a URL such as https://api.internal, not ${quote(url)}`);
      fixed = target;
      if (!target.host.endsWith(INTERNAL_SUFFIX) || target.host === INTERNAL_SUFFIX.slice(1)) {
        config.fail(
          'url',
          `must name an internal endpoint (a host ending in '${INTERNAL_SUFFIX}', e.g. https://api.internal); ${quote(url)} is public. Use a redirect to send clients elsewhere.`,
        );
      }
      const tcpPhase = ctx.phase === 'on_tcp_connect';
      if (tcpPhase !== (target.scheme === 'tcp' || target.scheme === 'tls')) {
        config.fail(
          'url',
          tcpPhase
            ? `must be a tcp:// or tls:// internal URL in on_tcp_connect, not ${quote(url)}`
            : `must be an http:// or https:// internal URL in on_http_request, not ${quote(url)}`,
        );
      }
    }
    const binding = config.string('binding') ?? 'internal';
    if (binding !== 'internal')
      config.fail('binding', `must be "internal", not ${quote(binding, '"')}`);
    const given = config.string('on_error') ?? 'halt';
    const onError: 'halt' | 'continue' =
      given === 'halt' || given === 'continue'
        ? given
        : config.fail('on_error', `must be "halt" or "continue", not ${quote(given, '"')}`);
    const template = ctx.template(url, 'url');
    return {
      alwaysTerminates: onError === 'halt',
      run(c) {
        const target = c.render(template);
        // Whether the target is online matters only when the next action may run instead.
        if (onError === 'continue' && c.internalOnline(target) === false) {
          c.event('error', `the internal endpoint ${target} is not online; continuing`, {
            url: target,
          });
          return undefined;
        }
        c.event('log', `forwarded to ${target}`, { url: target });
        return {
          kind: 'forward-internal',
          url: target,
          onError,
          target: fixed ?? internalTarget(target),
        };
      },
    };
  },
};
