import { CODES } from '../../core/errors.js';
import { egressFetch } from '../../core/egress-guard.js';
import type { CompiledExpression } from '../cel.js';
import type { Template } from '../interpolate.js';
import { REDACTED } from '../secrets.js';
import { isMapping, type ConfigReader } from './config.js';
import { checkHeaderName } from './header-names.js';
import type { ActionSpec, PhaseContext, Terminal } from './types.js';

const METHODS = ['GET', 'PUT', 'POST', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const TIMEOUT = { min: 1000, max: 30_000, range: '1s to 30s', example: '"3s"' };
const REDIRECTS = [301, 302, 303, 307, 308];
/** ngrok retries a call at most this many times, when its retry_condition asks. */
const MAX_RETRIES = 3;
/**
 * What later rules (and retry_condition) read of a failed call: no address or reason, since the
 * guard's refusal or a network error would tell an authtoken holder what a name resolves to or
 * what listens inside. The operator's event has the detail.
 */
const CALL_FAILED = `the call failed (${CODES.egressFailed})`;

/** What a failed call tells the client with `on_error: halt` (the reason stays in the event). */
const HALT: Terminal = Object.freeze({
  kind: 'respond',
  status: 502,
  headers: Object.freeze({}),
  body: '',
  refusal: Object.freeze({
    code: CODES.egressFailed,
    title: 'Bad Gateway',
    message: "A call this endpoint's traffic policy makes before answering failed.",
  }),
});

/** A query parameter: `{key, value}` (or `{name, value}`), both interpolated. */
interface QueryParam {
  key: Template;
  value: Template;
}

function queryParams(config: ConfigReader, compile: (text: string, at: string) => Template) {
  const raw = config.value('query_params');
  if (raw === undefined) return [];
  if (!Array.isArray(raw) || raw.length > 32) {
    return config.fail('query_params', 'must be a list of at most 32 {key, value} mappings');
  }
  return raw.map((item: unknown, i): QueryParam => {
    const at = `query_params[${i}]`;
    const key = isMapping(item) ? (item.key ?? item.name) : undefined;
    const value = isMapping(item) ? item.value : undefined;
    if (typeof key !== 'string' || key === '' || key.length > 128) {
      return config.fail(`${at}.key`, 'must be a name of 1 to 128 characters');
    }
    if (typeof value !== 'string' || value.length > 8192) {
      return config.fail(`${at}.value`, 'must be text of at most 8192 characters');
    }
    return { key: compile(key, `${at}.key`), value: compile(value, `${at}.value`) };
  });
}

/** A header value or body as later rules may read it: a template that reads a secret is hidden. */
const shown = (t: Template, text: string): string => (t.secrets.length > 0 ? REDACTED : text);

/** What one attempt sends. */
interface Outbound {
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** An answer as `actions.ngrok.http_request.res` shows it (`header`, `time_ms`: ngrok's names). */
interface Answer {
  status_code: bigint;
  headers: Map<string, string[]>;
  header: Map<string, string[]>;
  body: string;
  time_ms: bigint;
}

/** One attempt: the answer after redirects, or why there was none (the detail, for the event). */
type Attempt = { res: Answer } | { error: string };

/**
 * Send `out` to `target`, following up to `maxRedirects` redirects (each hop checked by the
 * egress guard again), and note each hop in `hops`. Throws only when `signal` ended the action.
 */
async function attempt(
  target: URL,
  out: Outbound,
  maxRedirects: number,
  signal: AbortSignal,
  hops: Array<Record<string, unknown>>,
): Promise<Attempt> {
  let current = target;
  let method = out.method;
  let body = out.body;
  try {
    for (let hop = 0; ; hop++) {
      const started = Date.now();
      const res = await egressFetch(current, { method, headers: out.headers, body, signal });
      const location = res.headers.get('location');
      const headers = new Map<string, string[]>();
      res.headers.forEach((value, name) => headers.set(name, [value]));
      const status = BigInt(res.status);
      const ms = BigInt(Date.now() - started);
      // ngrok's fields of an attempt, and the url and status_code Burrow listed first. No
      // resolved_ip: later rules must not learn what a name resolves to (see CALL_FAILED).
      hops.push({
        url: current.href,
        status_code: status,
        response_status_code: status,
        response_header: headers,
        response_time_ms: ms,
      });
      if (REDIRECTS.includes(res.status) && location !== null && hop < maxRedirects) {
        current = new URL(location, current);
        // As browsers do: a 303 (and a 301/302 of a POST) becomes a GET without a body.
        if (
          res.status === 303 ||
          ((res.status === 301 || res.status === 302) && method === 'POST')
        ) {
          method = 'GET';
          body = undefined;
        }
        continue;
      }
      const text = await res.text();
      return { res: { status_code: status, headers, header: headers, body: text, time_ms: ms } };
    }
  } catch (err) {
    if (signal.aborted) throw err;
    return { error: (err as Error).message || String(err) };
  }
}

/**
 * Whether `retry_condition` asks for another try after attempt `n` failed, reading ngrok's
 * `attempts` and `last_attempt` (`req`, `res` when there was an answer, with ngrok's `statusCode`
 * spelling too, and `error`). A condition that fails to evaluate says no, with an event.
 */
function retryWanted(
  c: PhaseContext,
  condition: CompiledExpression,
  n: number,
  req: Record<string, unknown>,
  last: Attempt,
): boolean {
  const lastAttempt = new Map<string, unknown>([
    ['req', req],
    ['error', 'error' in last ? CALL_FAILED : ''],
  ]);
  if ('res' in last) lastAttempt.set('res', { ...last.res, statusCode: last.res.status_code });
  const activation = { ...c.activation, attempts: BigInt(n), last_attempt: lastAttempt };
  try {
    return condition.evaluate(activation) === true;
  } catch (err) {
    c.event(
      'error',
      `http-request retry_condition ${JSON.stringify(condition.source)} failed: ${(err as Error).message.split('\n')[0]}; not retrying`,
    );
    return false;
  }
}

/**
 * `http-request`: call an HTTP service from the policy (ngrok's action): `url`, `method`,
 * `query_params`, `headers` and `body` interpolate; the call goes through the egress guard (no
 * internal address without `--egress-allow`), redirects are followed up to `max_redirects`, each
 * hop checked again, all within `timeout`. After a failed attempt (no answer, or a status of 400
 * or more) `retry_condition`, when given, may ask for up to 3 more. Later rules read
 * `actions.ngrok.http_request.req`, `.res` (status_code, headers, body) and `.error`; on a
 * failure, `on_error: halt` answers 502.
 * @example { type: 'http-request', config: { url: 'https://audit.example/hit?ip=${conn.client_ip}', on_error: 'continue' } }
 */
export const httpRequestAction: ActionSpec = {
  type: 'http-request',
  phases: ['on_http_request', 'on_http_response'],
  termination: 'conditionally',
  configKeys: [
    'url',
    'method',
    'query_params',
    'headers',
    'body',
    'max_redirects',
    'timeout',
    'retry_condition',
    'on_error',
  ],
  compile(config, ctx) {
    const url = ctx.template(
      config.string('url', { required: true, example: '"https://api.example/check"' })!,
      'url',
    );
    const method = (config.string('method') ?? 'GET').toUpperCase();
    if (!(METHODS as readonly string[]).includes(method)) {
      config.fail('method', `must be one of ${METHODS.join(', ')}, not ${method}`);
    }
    const params = queryParams(config, (text, at) => ctx.template(text, at));
    const headerMap = config.stringMap('headers', { min: 0, max: 10 }) ?? {};
    const headers = Object.entries(headerMap).map(
      ([name, value]) =>
        [
          checkHeaderName(config, `headers.${name}`, name, 'set'),
          ctx.outboundTemplate(value, `headers.${name}`),
        ] as const,
    );
    const bodyText = config.string('body');
    const body = bodyText === undefined ? undefined : ctx.outboundTemplate(bodyText, 'body');
    if (body !== undefined && (method === 'GET' || method === 'OPTIONS')) {
      config.fail('body', `is not sent with ${method}; use POST, PUT, PATCH or DELETE`);
    }
    const maxRedirects = config.integer('max_redirects', { min: 0, max: 100 }) ?? 10;
    const timeoutMs = config.duration('timeout', TIMEOUT) ?? 3000;
    const retryText = config.string('retry_condition');
    const retry =
      retryText === undefined
        ? undefined
        : ctx.expression(retryText, 'retry_condition', 'condition', 'retry');
    const onError = config.string('on_error') ?? 'continue';
    if (onError !== 'continue' && onError !== 'halt') {
      config.fail('on_error', `must be continue or halt, not ${onError}`);
    }

    const call = async (c: PhaseContext): Promise<Terminal | undefined> => {
      let target: URL;
      const rendered = c.render(url);
      try {
        target = new URL(rendered);
        if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new Error();
      } catch {
        return failed(c, 'invalid_url', `${JSON.stringify(rendered)} is not an http(s) URL`);
      }
      for (const p of params) target.searchParams.append(c.render(p.key), c.render(p.value));
      const sentHeaders: Record<string, string> = {};
      const shownHeaders: Record<string, string> = {};
      for (const [name, value] of headers) {
        const text = c.render(value);
        sentHeaders[name] = text;
        shownHeaders[name] = shown(value, text);
      }
      const bodyOut = body === undefined ? undefined : c.render(body);
      const req = {
        method,
        url: target.href,
        headers: shownHeaders,
        body: body === undefined || bodyOut === undefined ? '' : shown(body, bodyOut),
      };
      // One signal for every attempt: `timeout` bounds the whole action, retries included.
      const signal = AbortSignal.timeout(timeoutMs);
      const attempts: Array<Record<string, unknown>> = [];
      const out: Outbound = { method, headers: sentHeaders, body: bodyOut };
      try {
        for (let n = 1; ; n++) {
          const last = await attempt(target, out, maxRedirects, signal, attempts);
          const failedAttempt = 'error' in last || last.res.status_code >= 400n;
          if (failedAttempt && retry && n <= MAX_RETRIES && retryWanted(c, retry, n, req, last)) {
            continue;
          }
          if ('error' in last) return failed(c, 'request_failed', last.error, req, attempts);
          c.setActionResult('http_request', { req, res: last.res, attempts });
          return undefined;
        }
      } catch (err) {
        const timedOut = signal.aborted;
        const detail = timedOut
          ? `no answer within ${timeoutMs / 1000}s`
          : (err as Error).message || String(err);
        return failed(c, timedOut ? 'timeout' : 'request_failed', detail, req, attempts);
      }
    };

    /** Record a failure: later rules read {@link CALL_FAILED} or the timeout, the event the detail. */
    const failed = (
      c: PhaseContext,
      code: string,
      detail: string,
      req?: Record<string, unknown>,
      attempts: Array<Record<string, unknown>> = [],
    ): Terminal | undefined => {
      const message = code === 'request_failed' ? CALL_FAILED : detail;
      c.setActionResult('http_request', {
        ...(req && { req }),
        attempts,
        error: { code, message },
      });
      c.event(
        'error',
        `http-request failed (${code}): ${detail}; ${onError === 'halt' ? 'answering 502 (on_error: halt)' : 'going on (on_error: continue)'}`,
      );
      return onError === 'halt' ? HALT : undefined;
    };

    return { alwaysTerminates: false, run: call };
  },
};
