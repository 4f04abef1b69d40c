/**
 * on_http_response on the lean relay (http-policy-lean.ts decides what runs): one endpoint's
 * phase on the agent's response head, then those of the endpoints that forwarded the request
 * there (forward-internal), nearest first, each on the headers the one before left. Used alike by
 * HTTP/1.1 (response-relay.ts), HTTP/2 (h2-exchange.ts) and HTTP/2 calls (h2-call.ts).
 */
import type { Readable, Transform } from 'node:stream';
import { fieldProblem, headersProblem } from '../../../core/http-wire.js';
import type {
  ConnInput,
  HttpResponseDecision,
  PolicyVars,
  RequestInput,
  RespondDecision,
} from '../../../policy/index.js';
import type { TunnelPolicy } from '../../registry/tunnel-registry.js';
import { responseTransforms } from './body-transforms.js';
import { applyToRawHeaders, RESPONSE_ADD_OWNED, RESPONSE_REMOVE_OWNED } from './header-changes.js';
import type { Settled } from './connection-policy.js';

/** What on_http_response needs, kept from the request's phases. */
export interface ResponsePhase {
  policy: TunnelPolicy;
  conn: ConnInput;
  req: RequestInput;
  vars: PolicyVars;
  /**
   * The response phase of the endpoint that forwarded the request here (forward-internal): it
   * runs next, on the response as this one left it.
   */
  next?: ResponsePhase | undefined;
}

/**
 * The response head's headers after on_http_response: `raw` (as parseResponseHead read them, so
 * every field of it can be written) with its changes, and the body's transforms (none, usually);
 * `{ problem }` for a header it added that cannot be written (answered with the 502 page);
 * `{ answer }` when the phase replaced the response (custom-response); or
 * undefined when the phase cannot be applied (it threw or failed), and the policy fails closed.
 * A promise while its decision waits (http-request). The phases of the endpoints that forwarded
 * the request (`phase.next`) run after it, on the headers it left; an answer it made is final.
 * @example const after = leanResponseHeaders(run.response, 200, response.raw);
 */
export function leanResponseHeaders(
  phase: ResponsePhase,
  status: number,
  raw: string[],
): ResponseAfterPhase | Promise<ResponseAfterPhase> {
  const after = onePhase(phase, status, raw);
  const next = phase.next;
  if (!next) return after;
  if (after instanceof Promise) return after.then((a) => thenNext(a, next, status));
  return thenNext(after, next, status);
}

/** `after` (one phase's outcome) carried through the phases of `next` on. */
function thenNext(
  after: ResponseAfterPhase,
  next: ResponsePhase,
  status: number,
): ResponseAfterPhase | Promise<ResponseAfterPhase> {
  if (!after || !('headers' in after)) return after;
  const outer = leanResponseHeaders(next, status, after.headers);
  const joined = (o: ResponseAfterPhase): ResponseAfterPhase =>
    o && 'headers' in o && after.transforms.length > 0
      ? { headers: o.headers, transforms: [...after.transforms, ...o.transforms] }
      : o;
  return outer instanceof Promise ? outer.then(joined) : joined(outer);
}

/**
 * A decision of {@link leanResponseHeaders} that waits (an http-request call) for a response whose
 * body waits in `body`: the body is held back meanwhile; `apply` gets the outcome once it is made,
 * and the body flows again after it if the exchange still `holds()` the stream. An exchange
 * `over()` by then (its client left) gets nothing. (A decision made at once is applied by the
 * caller itself: no closure per response for the common case.)
 * @example const after = leanResponseHeaders(phase, status, raw);
 * if (after instanceof Promise) awaitResponsePhase(after, stream, (a) => answer(a), exchangeState);
 * else answer(after);
 */
export function awaitResponsePhase(
  after: Promise<ResponseAfterPhase>,
  body: Pick<Readable, 'pause' | 'resume'>,
  apply: (after: ResponseAfterPhase) => void,
  state: { over(): boolean; holds(): boolean },
): void {
  body.pause();
  void after.then((settled) => {
    if (state.over()) return;
    apply(settled);
    if (state.holds()) body.resume();
  });
}

/** One endpoint's on_http_response, as {@link leanResponseHeaders} says. */
function onePhase(
  phase: ResponsePhase,
  status: number,
  raw: string[],
): ResponseAfterPhase | Promise<ResponseAfterPhase> {
  let d: Settled<HttpResponseDecision>;
  try {
    d = phase.policy.runner.onHttpResponse({
      conn: phase.conn,
      endpoint: phase.policy.endpoint,
      req: phase.req,
      res: { status_code: status, headers: raw },
      vars: phase.vars,
    });
  } catch {
    return undefined;
  }
  // A decision that waits (an http-request call) is waited for; one that fails, fails closed.
  if (d instanceof Promise)
    return d.then(
      (r) => responseAfter(r, raw),
      () => undefined,
    );
  return responseAfter(d, raw);
}

/** What {@link leanResponseHeaders} makes of the response phase's decision `d`. */
export type ResponseAfterPhase =
  | { headers: string[]; transforms: readonly Transform[] }
  | { problem: string }
  | { answer: RespondDecision }
  | undefined;

function responseAfter(d: HttpResponseDecision, raw: string[]): ResponseAfterPhase {
  if (d.kind === 'respond') {
    // An answer with a header that cannot be written is the 502 page instead.
    const problem = headersProblem(d.headers);
    return problem ? { problem } : { answer: d };
  }
  // The response's own fields were read by the rules fieldProblem checks: only those the phase
  // adds (and the ingress does not own) can fail, and they are checked in the order written.
  for (const [name, value] of d.headers.add) {
    if (RESPONSE_ADD_OWNED.has(name)) continue;
    const problem = fieldProblem(name, value);
    if (problem) return { problem };
  }
  const headers = applyToRawHeaders(raw, d.headers, RESPONSE_REMOVE_OWNED, RESPONSE_ADD_OWNED);
  return { headers, transforms: responseTransforms(d) };
}
