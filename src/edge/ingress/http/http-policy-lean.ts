/**
 * A traffic policy on the relay, on either wire. A policy with no HTTP phase (IP restrictions,
 * connect-time rate limits) needs only its on_tcp_connect, once per connection and endpoint.
 * on_http_request runs on the parsed head (and on the body, read first, for the actions that
 * decide on it: body-peek.ts): the relay then carries the request with the policy's header
 * changes and target, or on to the internal endpoint forward-internal picks, or writes the
 * policy's answer, or closes the connection. What the policy keeps for the rest of the exchange
 * (its on_http_response, run on the response head by lean-response-phase.ts; its body rewrite;
 * circuit-breaker's counters, told the status) goes with the request as a {@link LeanPolicyRun}.
 * A phase costs a rule evaluation per request, not a second HTTP engine (issue 28).
 */
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { headersProblem } from '../../../core/http-wire.js';
import {
  NO_HEADER_CHANGES,
  type BodyRewrite,
  type ConnInput,
  type ForwardInternal,
  type HeaderChanges,
  type HttpRequestDecision,
  type PolicyVars,
  type RequestInput,
  type RespondDecision,
  type TcpConnectDecision,
} from '../../../policy/index.js';
import type { ResponsePhase } from './lean-response-phase.js';
import { POLICY_FAILED_ANSWER, rewrittenRequest } from './http-policy-writes.js';
import { errorPage, INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import { routingHost } from './http-forwarding.js';
import type { TunnelPolicy } from '../../registry/tunnel-registry.js';
import { connectionState, type ConnectionPolicyState, type Settled } from './connection-policy.js';
import type { RequestHead } from './request-head.js';
import { tcpConnectDecision } from '../policy-gate.js';
import type { PolicyBodySource } from './body-peek.js';

/**
 * What the relay applies of a policy to one exchange: the request's header changes and new
 * target, the response phase to run on the response head (unset when the policy has none), and
 * who is told the status the client got.
 */
export interface LeanPolicyRun {
  requestHeaders: HeaderChanges;
  /** The request target url-rewrite made, checked and read as the edge reads one. */
  target?: string | undefined;
  response: ResponsePhase | undefined;
  /** circuit-breaker's counters: told each status written to the client (Exchange.count). */
  observers?: ReadonlyArray<(status: number) => void> | undefined;
  /** request-body-find-replace: the rewrite the request body streams through, sent chunked. */
  bodyRewrite?: BodyRewrite | undefined;
}

/**
 * What an endpoint that forwards a request (forward-internal) keeps for the rest of the exchange:
 * its request-body-find-replace, its on_http_response, and its circuit-breaker's counters.
 */
export interface ForwarderRun {
  bodyRewrite: BodyRewrite | undefined;
  response: ResponsePhase | undefined;
  observers: LeanPolicyRun['observers'];
}

/** What the lean relay does with one request to an endpoint with a policy. */
export type LeanVerdict =
  /** Carry it to this endpoint, with the policy's changes when it made any. */
  | { kind: 'relay'; run?: LeanPolicyRun | undefined }
  /** Carry it on to the internal endpoint of `forward`, as it is. */
  | {
      kind: 'forward';
      forward: ForwardInternal;
      decision: HttpRequestDecision;
      /** What the policy changed of the request before the hop: the next endpoint sees it so. */
      changes?: { headers: HeaderChanges; target: string | undefined } | undefined;
      /** Its response phase and observers, for the response that comes back through it. */
      forwarder?: ForwarderRun | undefined;
    }
  /**
   * Answer it with the policy's own response (deny, custom-response, a login redirect…), the
   * policy's 500 when it could not run, or the edge's page for a request it made unwritable.
   */
  | { kind: 'answer'; answer: RespondDecision }
  /** Close the connection without an answer (close-connection, on_tcp_connect's deny). */
  | { kind: 'close' };

const RELAY: LeanVerdict = { kind: 'relay' };
/** The variables of a connection whose policy has no on_tcp_connect: one object for them all. */
const NO_VARS: PolicyVars = Object.freeze({});

/** on_tcp_connect closed the connection. */
const CLOSED = Symbol('closed');
/** The policy could not run (it threw or its decision failed): it fails closed, with a 500. */
const FAILED = Symbol('failed');
type ConnectOutcome = PolicyVars | typeof CLOSED | typeof FAILED;

/** The policy's 500, as the relay writes a policy's answers. */
const POLICY_FAILED_DECISION: RespondDecision = {
  kind: 'respond',
  ...POLICY_FAILED_ANSWER,
  vars: NO_VARS,
};
const FAILED_VERDICT: LeanVerdict = { kind: 'answer', answer: POLICY_FAILED_DECISION };
const CLOSE_VERDICT: LeanVerdict = { kind: 'close' };

/**
 * The connection's on_tcp_connect outcome for `policy`, decided once per connection and policy
 * (policy-gate.ts tcpConnectDecision): its variables, or that it closed the connection or failed; a promise while a decision waits (an IP policy's rules looked
 * up), which the other requests of the connection (HTTP/2 streams) wait for too.
 */
function tcpConnectVars(
  state: ConnectionPolicyState,
  policy: TunnelPolicy,
): ConnectOutcome | Promise<ConnectOutcome> {
  if (!policy.runner.policy.has('on_tcp_connect')) return NO_VARS;
  const known = state.admitted.get(policy);
  if (known !== undefined) return known;
  let decision = state.decided.get(policy);
  if (decision === undefined) {
    decision = tcpConnectDecision(policy, state.conn);
    if (decision === undefined) return FAILED;
  }
  if (!(decision instanceof Promise)) return connectOutcome(state, policy, decision);
  state.decided.set(policy, decision);
  return decision.then(
    (d) => connectOutcome(state, policy, d),
    () => FAILED,
  );
}

function connectOutcome(
  state: ConnectionPolicyState,
  policy: TunnelPolicy,
  decision: TcpConnectDecision,
): ConnectOutcome {
  if (decision.kind === 'close') {
    state.decided.set(policy, decision);
    return CLOSED;
  }
  state.decided.delete(policy);
  state.admitted.set(policy, decision.vars);
  return decision.vars;
}

/**
 * What the relay does with a request (`head`) to an endpoint with `policy`: relay it there,
 * forward it to an internal endpoint, answer it, or close the connection. A decision that
 * waits (on_tcp_connect's IP policy lookup, jwt-validation's key lookup, a body the policy reads
 * first) is waited for: the verdict is then a promise.
 * @example const verdict = leanVerdict(socket, tunnel.policy, head, NO_BODY);
 */
export function leanVerdict(
  socket: Duplex,
  policy: TunnelPolicy,
  head: RequestHead,
  body: PolicyBodySource,
): LeanVerdict | Promise<LeanVerdict> {
  const state = connectionState(socket);
  const vars = tcpConnectVars(state, policy);
  if (vars instanceof Promise) {
    return vars.then((v) => requestVerdict(socket, state, policy, head, body, v));
  }
  return requestVerdict(socket, state, policy, head, body, vars);
}

/** The rest of {@link leanVerdict} once on_tcp_connect decided (`vars`): on_http_request's. */
function requestVerdict(
  socket: Duplex,
  state: ConnectionPolicyState,
  policy: TunnelPolicy,
  head: RequestHead,
  body: PolicyBodySource,
  vars: ConnectOutcome,
): LeanVerdict | Promise<LeanVerdict> {
  if (vars === CLOSED) return CLOSE_VERDICT;
  if (vars === FAILED) return FAILED_VERDICT;
  const phases = policy.runner.policy;
  const hasRequestPhase = phases.has('on_http_request');
  if (!hasRequestPhase && !phases.has('on_http_response')) return RELAY;
  const req: RequestInput = {
    method: head.method,
    url: head.target,
    scheme: (socket as Partial<TLSSocket>).encrypted === true ? 'https' : 'http',
    // As parsed: the phases build from them only what their rules read.
    headers: head.raw,
    // As Node's servers say it (`req.httpVersion`).
    version: head.h2 ? '2.0' : head.minor === 1 ? '1.1' : '1.0',
    received: Date.now(),
    // Read only when a rule needs it: the bytes stay to be relayed.
    body: body.read,
    trailers: body.trailers,
  };
  if (!hasRequestPhase) {
    return relayed(
      NO_HEADER_CHANGES,
      { policy, conn: state.conn, req, vars },
      undefined,
      undefined,
      undefined,
    );
  }
  let decision: Settled<HttpRequestDecision>;
  try {
    decision = policy.runner.onHttpRequest({
      conn: state.conn,
      endpoint: policy.endpoint,
      req,
      vars,
    });
  } catch {
    return FAILED_VERDICT;
  }
  if (decision instanceof Promise) {
    // A decision that waits (jwt-validation's signature check and key lookup) is waited for here;
    // one that fails is the policy's 500.
    return decision.then(
      (d) => verdictOf(d, policy, state.conn, req, head),
      (): LeanVerdict => FAILED_VERDICT,
    );
  }
  return verdictOf(decision, policy, state.conn, req, head);
}

/**
 * The verdict on a request (`req`, its head `head`) that `policy`'s on_http_request decided. A
 * module function, not a closure of {@link leanVerdict}: it runs for every request.
 */
function verdictOf(
  decision: HttpRequestDecision,
  policy: TunnelPolicy,
  conn: ConnInput,
  req: RequestInput,
  head: RequestHead,
): LeanVerdict {
  if (decision.kind === 'respond') {
    // An answer with a header that cannot be written is the edge's 502 page instead.
    const problem = headersProblem(decision.headers);
    return problem
      ? pageVerdict(INGRESS_ERRORS.unsafeResponseHead, head, problem)
      : { kind: 'answer', answer: decision };
  }
  if (decision.kind === 'close') return CLOSE_VERDICT;
  // A target or header value the policy made that cannot be written: the edge's page
  // (rewrittenRequest says which).
  const rewritten = rewrittenRequest(decision);
  if ('refused' in rewritten) return pageVerdict(rewritten.refused, head, rewritten.detail);
  const bodyRewrite = decision.bodyRewrite;
  const changes = decision.headers;
  const observers = decision.afterResponse?.length ? decision.afterResponse : undefined;
  const hasResponsePhase = policy.runner.policy.has('on_http_response');
  if (decision.forwardInternal) {
    // Header changes and a new target go on with the request; a body rewrite, the response phase
    // and status observers wait for the body and the response (withForwarders).
    const forward = decision.forwardInternal;
    const changed = changes.add.length > 0 || changes.remove.length > 0;
    const response = hasResponsePhase ? { policy, conn, req, vars: decision.vars } : undefined;
    const forwarder =
      response || observers || bodyRewrite ? { bodyRewrite, response, observers } : undefined;
    if (!changed && rewritten.target === undefined && !forwarder)
      return { kind: 'forward', forward, decision };
    return {
      kind: 'forward',
      forward,
      decision,
      changes:
        changed || rewritten.target ? { headers: changes, target: rewritten.target } : undefined,
      forwarder,
    };
  }
  if (
    changes.add.length === 0 &&
    changes.remove.length === 0 &&
    !hasResponsePhase &&
    rewritten.target === undefined &&
    observers === undefined &&
    bodyRewrite === undefined
  )
    return RELAY;
  const response = hasResponsePhase ? { policy, conn, req, vars: decision.vars } : undefined;
  return relayed(changes, response, rewritten.target, observers, bodyRewrite);
}

/**
 * The edge's page `error` for the request `head`, as an answer the relay writes and counts as the
 * endpoint's.
 * @example pageAnswer(INGRESS_ERRORS.cloudUnanswered, head)
 */
export function pageAnswer(
  error: IngressError,
  head: RequestHead,
  detail?: string,
): RespondDecision {
  const page = errorPage(error, routingHost(head.host) ?? '', head.accept, detail);
  return { kind: 'respond', ...page, vars: NO_VARS };
}

function pageVerdict(error: IngressError, head: RequestHead, detail: string): LeanVerdict {
  return { kind: 'answer', answer: pageAnswer(error, head, detail) };
}

/** Relay the request with what the policy made of it, and run `response` on its response. */
function relayed(
  requestHeaders: HeaderChanges,
  response: ResponsePhase | undefined,
  target: string | undefined,
  observers: LeanPolicyRun['observers'],
  bodyRewrite: BodyRewrite | undefined,
): LeanVerdict {
  return { kind: 'relay', run: { requestHeaders, target, response, observers, bodyRewrite } };
}
