import type { RE2JS } from 're2js';
import { CODES } from '../../core/errors.js';
import { quote } from '../../core/quote.js';
import type { Template } from '../interpolate.js';
import { describeValue, type PolicyPhase } from '../parse.js';
import { compileRegex } from '../regex.js';
import { isMapping, type ConfigReader } from './config.js';
import type {
  ActionCompileContext,
  ActionSpec,
  BodyReplacement,
  BodyRewrite,
  PhaseContext,
} from './types.js';

/** The most replacements one action takes: each is a stage the body streams through. */
const MAX_REPLACEMENTS = 10;

/** Media types, besides `text/*`, whose bodies are text. */
const TEXT_TYPES = new Set([
  'application/json',
  'application/xml',
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'application/x-www-form-urlencoded',
  'application/x-ndjson',
  'application/graphql',
  'application/yaml',
  'application/x-yaml',
]);

/**
 * Whether a body of `contentType` is text the find-replace actions may rewrite: `text/*`, JSON,
 * XML, JavaScript, form data and the like (`+json`, `+xml` too), in UTF-8 or ASCII (no charset
 * means UTF-8). Anything else, including no content type at all, is left alone.
 * @example isRewritableText('application/json; charset=utf-8') // true
 */
function isRewritableText(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const [type, ...params] = contentType.toLowerCase().split(';');
  const media = type!.trim();
  const textual =
    media.startsWith('text/') ||
    TEXT_TYPES.has(media) ||
    /^application\/[a-z0-9.+-]+\+(json|xml)$/.test(media);
  if (!textual) return false;
  for (const param of params) {
    const [name, value] = param.split('=').map((p) => p.trim());
    if (name === 'charset') {
      const charset = (value ?? '').replace(/^"|"$/g, '');
      return ['utf-8', 'utf8', 'us-ascii', 'ascii'].includes(charset);
    }
  }
  return true;
}

/** A replacement as compiled: the regex and the `to` template (groups `$1`…, `${}`). */
interface CompiledReplacement {
  regex: RE2JS;
  to: Template | undefined;
  field: 'data' | 'retry' | undefined;
}

function readReplacements(
  config: ConfigReader,
  ctx: ActionCompileContext,
  sse: boolean,
): CompiledReplacement[] {
  const list = config.value('replacements');
  const example = `e.g. [{from: "api_key=[a-z0-9]+", to: "api_key=REDACTED"}]`;
  if (list === undefined)
    config.fail('replacements', `is required: a list of {from, to}, ${example}`);
  if (!Array.isArray(list)) {
    return config.fail(
      'replacements',
      `must be a list of {from, to}, not ${describeValue(list)}`,
      CODES.policyActionConfig,
    );
  }
  if (list.length < 1 || list.length > MAX_REPLACEMENTS) {
    config.fail(
      'replacements',
      `must have 1 to ${MAX_REPLACEMENTS} entries, not ${list.length}; ${example}`,
    );
  }
  const keys = sse ? ['field', 'from', 'to'] : ['from', 'to'];
  return list.map((item: unknown, i): CompiledReplacement => {
    const at = `replacements[${i}]`;
    if (!isMapping(item)) {
      return config.fail(
        at,
        `must be a mapping {${keys.join(', ')}}, not ${describeValue(item)}`,
        CODES.policyActionConfig,
      );
    }
    for (const key of Object.keys(item)) {
      if (!keys.includes(key)) {
        config.fail(
          `${at}.${key}`,
          `is not a key of a replacement; it takes ${keys.join(', ')}`,
          CODES.policyActionConfig,
        );
      }
    }
    const from = item.from;
    if (from === undefined || from === null || from === '') {
      config.fail(`${at}.from`, `is required: an RE2 regular expression, ${example}`);
    }
    if (typeof from !== 'string') {
      return config.fail(
        `${at}.from`,
        `must be a string, not ${describeValue(from)}`,
        CODES.policyActionConfig,
      );
    }
    if (from.includes('${')) {
      config.fail(
        `${at}.from`,
        'cannot use ${} interpolation in Burrow: the pattern is compiled when the policy is saved',
      );
    }
    let regex: RE2JS;
    try {
      regex = compileRegex(from);
    } catch (err) {
      return config.fail(
        `${at}.from`,
        `is not a valid regular expression (RE2 syntax): ${(err as Error).message}`,
      );
    }
    const to = item.to ?? '';
    if (typeof to !== 'string') {
      return config.fail(
        `${at}.to`,
        `must be a string, not ${describeValue(to)}`,
        CODES.policyActionConfig,
      );
    }
    let field: 'data' | 'retry' | undefined;
    if (sse && item.field !== undefined && item.field !== null) {
      if (item.field !== 'data' && item.field !== 'retry') {
        config.fail(
          `${at}.field`,
          `must be data or retry, not ${typeof item.field === 'string' ? quote(item.field, '"') : describeValue(item.field)}`,
        );
      }
      field = item.field;
    }
    return {
      regex,
      to: to === '' ? undefined : ctx.template(to, `${at}.to`, regex.groupCount()),
      field,
    };
  });
}

/** The replacements ready to run in `c`'s message: `to` rendered with each match's groups. */
function bound(c: PhaseContext, compiled: readonly CompiledReplacement[]): BodyReplacement[] {
  return compiled.map(({ regex, to, field }) => ({
    regex,
    field,
    replace: to === undefined ? () => '' : (groups) => c.render(to, groups),
  }));
}

/** Add `replacements` to the message's rewrite (a second action appends to the first's). */
function record(c: PhaseContext, kind: BodyRewrite['kind'], replacements: BodyReplacement[]): void {
  const existing = c.bodyRewrite;
  c.bodyRewrite = {
    kind,
    replacements:
      existing?.kind === kind ? [...existing.replacements, ...replacements] : replacements,
  };
}

/** Whether the body as sent is unencoded: compress-response earlier in the phase encodes it after. */
function unencoded(c: PhaseContext, encodings: readonly string[]): boolean {
  if (c.compress) return true;
  return encodings.every((e) => e.trim() === '' || e.trim().toLowerCase() === 'identity');
}

function spec(
  type: string,
  phase: PolicyPhase,
  kind: BodyRewrite['kind'],
  applies: (c: PhaseContext) => boolean,
): ActionSpec {
  return {
    type,
    phases: [phase],
    termination: 'never',
    configKeys: ['replacements'],
    compile(config, ctx) {
      const compiled = readReplacements(config, ctx, kind === 'sse');
      return {
        alwaysTerminates: false,
        run(c) {
          if (!applies(c)) return undefined;
          record(c, kind, bound(c, compiled));
          if (c.phase === 'on_http_response') {
            // The new length is not known before the body has streamed: it goes chunked.
            c.headers!.remove('content-length');
            c.publishHeaders();
          }
          return undefined;
        },
      };
    },
  };
}

/**
 * `request-body-find-replace`: replace every match of each `replacements[].from` (RE2) in the
 * request body with its `to` (`$1`… groups, `${}`), in order, as the body streams to the
 * upstream. Only textual, unencoded bodies are changed; the upstream gets them chunked.
 * @example { type: 'request-body-find-replace', config: { replacements: [{ from: 'secret', to: 'xxx' }] } }
 */
export const requestBodyFindReplaceAction: ActionSpec = spec(
  'request-body-find-replace',
  'on_http_request',
  'body',
  (c) => {
    const req = c.activation.req!;
    const hasBody =
      req.header('transfer-encoding').length > 0 ||
      req.header('content-length').some((v) => v.trim() !== '0');
    return (
      hasBody &&
      isRewritableText(req.header('content-type')[0]) &&
      unencoded(c, req.header('content-encoding'))
    );
  },
);

/**
 * Whether the response has a textual, unencoded body for response-body-find-replace (`sse`
 * false) or sse-find-replace (`sse` true): each takes the bodies the other leaves.
 */
function rewritableResponse(c: PhaseContext, sse: boolean): boolean {
  const res = c.activation.res!;
  const status = Number(res.status_code);
  // A response the client gets no body for.
  if (status === 204 || status === 304 || c.activation.req?.method === 'HEAD') return false;
  return (
    (res.content_type.mediaType === 'text/event-stream') === sse &&
    isRewritableText(res.header('content-type')[0]) &&
    unencoded(c, res.header('content-encoding'))
  );
}

/**
 * `response-body-find-replace`: the same for the response body, as it streams to the client.
 * Event streams are left to sse-find-replace, which rewrites them event by event.
 * @example { type: 'response-body-find-replace', config: { replacements: [{ from: 'internal\\.example', to: 'example.com' }] } }
 */
export const responseBodyFindReplaceAction: ActionSpec = spec(
  'response-body-find-replace',
  'on_http_response',
  'body',
  (c) => rewritableResponse(c, false),
);

/**
 * `sse-find-replace`: for `text/event-stream` responses, replace matches in each event's `data`
 * (its data lines joined by `\n`) or `retry` field (`field`, default data), writing each event as
 * soon as it is complete.
 * @example { type: 'sse-find-replace', config: { replacements: [{ from: 'foo', to: 'bar' }] } }
 */
export const sseFindReplaceAction: ActionSpec = spec(
  'sse-find-replace',
  'on_http_response',
  'sse',
  (c) => rewritableResponse(c, true),
);
