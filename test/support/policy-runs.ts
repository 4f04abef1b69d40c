import type { HttpRequestDecision, HttpResponseDecision } from '../../src/policy/runner.js';
import type { RequestInput, ResponseInput } from '../../src/policy/variables.js';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
  sync,
} from './policy-fixtures.js';

/**
 * The decision of an HTTP policy whose one on_http_request rule runs `actions`, for `req` on a
 * TLS 1.3 connection (the phase must answer synchronously).
 * @example expect(requestDecision([{ type: 'deny' }])).toMatchObject({ kind: 'respond', status: 403 });
 */
export function requestDecision(
  actions: unknown[],
  req: RequestInput = SAMPLE_REQUEST,
): HttpRequestDecision {
  const { runner } = bindPolicy(oneRule('on_http_request', actions), 'http');
  return sync(runner.onHttpRequest({ conn: CONN_TLS13, req }));
}

/**
 * The decision of an HTTP policy whose one on_http_response rule runs `actions`, for `res` to
 * `req` on a TLS 1.3 connection (the phase must answer synchronously).
 * @example expect(responseDecision([{ type: 'remove-headers', config: { headers: ['server'] } }]).kind).toBe('continue');
 */
export function responseDecision(
  actions: unknown[],
  req: RequestInput = SAMPLE_REQUEST,
  res: ResponseInput = SAMPLE_RESPONSE,
): HttpResponseDecision {
  const { runner } = bindPolicy(oneRule('on_http_response', actions), 'http');
  return sync(runner.onHttpResponse({ conn: CONN_TLS13, req, res }));
}
