/**
 * Which policies the lean relay carries requests for, and what it does with them. A policy with no
 * HTTP phase (IP restrictions, connect-time rate limits) needs only its on_tcp_connect, once per
 * connection. A policy whose on_http_request only routes (forward-internal, log) is run here on
 * the parsed head: it changes nothing the relay would have to write differently, so the relay
 * carries the request on to the internal endpoint it picks, and the hop costs a rule evaluation
 * rather than the full path. Whatever the relay does not carry goes to the full path with the
 * decisions made here, which it finishes rather than makes again: a phase runs once per request.
 */
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type {
  ForwardInternal,
  HttpRequestDecision,
  PolicyVars,
  TcpConnectDecision,
} from '../../../policy/index.js';
import type { TunnelPolicy } from '../../registry/tunnel-registry.js';
import { headersOf } from './http-forward-internal.js';
import { connectionState, type ConnectionPolicyState, type Settled } from './http-policy.js';
import type { RequestHead } from './request-head.js';

/**
 * Actions that only route or record. Only an action that changes nothing of the request or the
 * response (no headers, target, body or observers) may be listed: the relay carries the request as
 * the client sent it.
 */
const ROUTING_ACTIONS: ReadonlySet<string> = new Set(['forward-internal', 'log']);

/** Per compiled policy: whether the relay can run it (computed once, policies are immutable). */
const shapes = new WeakMap<TunnelPolicy['runner']['policy'], boolean>();

/**
 * Whether the lean relay can run `policy` at all: no on_http_response, and an on_http_request, if
 * any, made only of routing actions. A policy of another shape always takes the full path.
 * @example leanShaped(tunnel.policy) // true for `on_http_request: [forward-internal …]`
 */
export function leanShaped(policy: TunnelPolicy): boolean {
  const compiled = policy.runner.policy;
  let shaped = shapes.get(compiled);
  if (shaped === undefined) {
    shaped =
      !compiled.has('on_http_response') &&
      // The relay does not read bodies; req.ts.body_received needs the body read first.
      !compiled.waitsForBody &&
      compiled.phases.on_http_request.every((rule) =>
        rule.actions.every((a) => ROUTING_ACTIONS.has(a.type)),
      );
    shapes.set(compiled, shaped);
  }
  return shaped;
}

/** What the lean relay does with one request to an endpoint with a policy. */
export type LeanVerdict =
  /** Carry it to this endpoint. */
  | { kind: 'relay' }
  /** Carry it on to the internal endpoint of `forward`, as it is. */
  | { kind: 'forward'; forward: ForwardInternal; decision: HttpRequestDecision }
  /** The full path serves it; `decision` is its on_http_request outcome when it was run here. */
  | { kind: 'full'; decision?: Settled<HttpRequestDecision> | undefined };

const RELAY: LeanVerdict = { kind: 'relay' };
const FULL: LeanVerdict = { kind: 'full' };

/**
 * The connection's on_tcp_connect outcome for `policy` (once per connection and policy, as on
 * the full path): its variables when it let the connection through at once, else undefined (it
 * waits, closes or throws), and the full path finishes the decision started here.
 */
function tcpConnectVars(
  state: ConnectionPolicyState,
  policy: TunnelPolicy,
): PolicyVars | undefined {
  const known = state.admitted.get(policy);
  if (known !== undefined) return known;
  if (!policy.runner.policy.has('on_tcp_connect')) return Object.freeze({});
  if (state.decided.has(policy)) return undefined;
  let decision: Settled<TcpConnectDecision>;
  try {
    decision = policy.runner.onTcpConnect({ conn: state.conn, endpoint: policy.endpoint });
  } catch {
    return undefined;
  }
  if (!(decision instanceof Promise) && decision.kind !== 'close') {
    state.admitted.set(policy, decision.vars);
    return decision.vars;
  }
  state.decided.set(policy, decision);
  return undefined;
}

/**
 * What the lean relay does with a request (`head`) to an endpoint with `policy`: relay it there,
 * forward it to an internal endpoint, or leave it to the full path (an HTTP phase that changes
 * the request or answers it, a decision that has to wait, a policy that throws).
 * @example const verdict = leanVerdict(socket, tunnel.policy, head);
 */
export function leanVerdict(socket: Duplex, policy: TunnelPolicy, head: RequestHead): LeanVerdict {
  if (!leanShaped(policy)) return FULL;
  const state = connectionState(socket);
  const vars = tcpConnectVars(state, policy);
  if (vars === undefined) return FULL;
  const runner = policy.runner;
  if (!runner.policy.has('on_http_request')) return RELAY;
  let decision: Settled<HttpRequestDecision>;
  try {
    decision = runner.onHttpRequest({
      conn: state.conn,
      endpoint: policy.endpoint,
      req: {
        method: head.method,
        url: head.target,
        scheme: (socket as Partial<TLSSocket>).encrypted === true ? 'https' : 'http',
        headers: headersOf(head.raw),
        version: head.minor === 1 ? '1.1' : '1.0',
      },
      vars,
    });
  } catch {
    return FULL;
  }
  // A routing-only phase changes nothing (ROUTING_ACTIONS): it forwards, or lets the request by.
  if (decision instanceof Promise || decision.kind !== 'continue')
    return { kind: 'full', decision };
  return decision.forwardInternal
    ? { kind: 'forward', forward: decision.forwardInternal, decision }
    : RELAY;
}
