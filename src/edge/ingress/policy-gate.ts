/**
 * The connect gate of the raw listeners (TCP ports, TLS by SNI), the same for every route
 * whatever made it (an agent's endpoint, a cloud endpoint, an edge's hostport): the refusals
 * that come before anything (an edge's ip_restriction), TLS that ends at the edge, then the
 * route's on_tcp_connect, and the forward-internal hops it makes (`admitThrough`, the one walk of
 * both listeners); and the connection's `conn.*` variables.
 */
import type { Duplex } from 'node:stream';
import { ipAllowed } from '../../core/cidr.js';
import type {
  ConnInput,
  ForwardInternal,
  PolicyVars,
  TcpConnectDecision,
  TlsInput,
  TlsTermination,
  TlsTerminator,
} from '../../policy/index.js';
import { clientIp } from '../registry/connect-tunnel.js';
import { followInternal, refusalText } from '../registry/internal-routing.js';
import type {
  EdgeTermination,
  OnlineTunnel,
  TunnelPolicy,
  TunnelRegistry,
} from '../registry/tunnel-registry.js';

const NO_VARS: PolicyVars = Object.freeze({});

/** The address facts of a socket (a TLS socket has them too). */
interface SocketAddresses {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
  localAddress?: string | undefined;
  localPort?: number | undefined;
}

/**
 * The `conn.*` variables of a connection: client and server address, start time, and TLS facts
 * when there are any.
 * @example runner.onTcpConnect({ conn: connInputOf(socket), endpoint })
 */
export function connInputOf(socket: SocketAddresses, tls?: TlsInput): ConnInput {
  return {
    client_ip: clientIp(socket),
    client_port: socket.remotePort,
    server_ip: clientIp({ remoteAddress: socket.localAddress }),
    server_port: socket.localPort,
    ts: { start: Date.now() },
    tls,
  };
}

/**
 * How a listener ends TLS here: for a route that terminates at the edge (its EdgeTermination)
 * and for the terminate-tls action (TlsTermination). Resolves with the finished handshake's TLS
 * facts, or undefined when it failed (the connection is then closed).
 */
export type EdgeTlsEnd = (
  settings: TlsTermination | EdgeTermination,
) => Promise<TlsInput | undefined>;

/**
 * Let a new connection through to `route` or close it: the route's refusal and ip_restriction
 * first (nothing else runs for a client they refuse, not even a TLS handshake), then TLS ended
 * here when the route terminates at the edge (`endTls`), then its on_tcp_connect, and then
 * `admitted` with what set-vars left and where forward-internal points. A listener without
 * `endTls` (plain TCP) closes a route that needs it, and the terminate-tls action closes too.
 * @example admitConnection(route, socket, () => connInputOf(socket), () => relay(socket));
 */
export function admitConnection(
  route: OnlineTunnel,
  socket: Duplex & SocketAddresses,
  conn: () => ConnInput,
  admitted: (vars: PolicyVars, forwardInternal?: ForwardInternal) => void,
  endTls?: EdgeTlsEnd,
): void {
  if (
    route.refusal !== undefined ||
    (route.ipRules !== undefined && !ipAllowed(route.ipRules, clientIp(socket)))
  ) {
    socket.destroy();
    return;
  }
  const termination = route.termination;
  if (termination === undefined) {
    runTcpConnect(route.policy, socket, conn, admitted, endTls);
    return;
  }
  if (!endTls) {
    socket.destroy();
    return;
  }
  endTls(termination).then(
    (tls) => {
      if (tls === undefined) socket.destroy();
      else runTcpConnect(route.policy, socket, conn, admitted, endTls);
    },
    () => socket.destroy(),
  );
}

/** What a raw listener does with a connection at each endpoint of its way ({@link admitThrough}). */
export interface ConnectionWay {
  /** The forward-internal hops the listener follows: `['tcp']` or `['tls']`. */
  protos: readonly string[];
  /** The connection's `conn.*` for `tunnel`'s on_tcp_connect, and how TLS ends here (TLS only). */
  gate(tunnel: OnlineTunnel): { conn: () => ConnInput; endTls?: EdgeTlsEnd | undefined };
  /** `tunnel` serves the connection itself: its agent gets it. */
  serve(tunnel: OnlineTunnel): void;
  /** Nothing serves it: a hop that cannot be made (a loop, offline), or a cloud endpoint's dead end. */
  refuse(tunnel: OnlineTunnel, why: string): void;
}

/**
 * A raw connection's way from `tunnel`: its gate ({@link admitConnection}), then the internal
 * endpoint its on_tcp_connect forwards to (in-process, `chain` against loops), and so on, until
 * an endpoint serves it or nothing can. A cloud endpoint whose policy forwards nowhere refuses.
 * @example admitThrough(registry, socket, registry.pick(tunnel), [], { protos: ['tcp'], gate, serve, refuse });
 */
export function admitThrough(
  registry: Pick<TunnelRegistry, 'internal'>,
  socket: Duplex & SocketAddresses,
  tunnel: OnlineTunnel,
  chain: string[],
  way: ConnectionWay,
): void {
  const { conn, endTls } = way.gate(tunnel);
  const admitted = (_vars: PolicyVars, forward?: ForwardInternal): void => {
    const step = forward && followInternal(registry, forward, chain, tunnel, way.protos);
    if (step && 'next' in step) admitThrough(registry, socket, step.next, step.chain, way);
    else if (step) way.refuse(tunnel, refusalText(step.refusal));
    else if (tunnel.cloud) way.refuse(tunnel, 'a cloud endpoint that forwards nowhere');
    else way.serve(tunnel);
  };
  admitConnection(tunnel, socket, conn, admitted, endTls);
}

/**
 * `policy`'s on_tcp_connect for a connection with `conn`, the one place it is asked, on every
 * listener: its decision, a promise while it waits (IP policy lookups), or undefined when the
 * policy could not run (the caller closes the connection: a gate that cannot decide stays shut).
 * @example const decision = tcpConnectDecision(tunnel.policy, connInputOf(socket));
 */
export function tcpConnectDecision(
  policy: TunnelPolicy,
  conn: ConnInput,
  terminateTls?: TlsTerminator,
): TcpConnectDecision | Promise<TcpConnectDecision> | undefined {
  try {
    return policy.runner.onTcpConnect({ conn, endpoint: policy.endpoint, terminateTls });
  } catch {
    return undefined;
  }
}

/**
 * Run `policy`'s on_tcp_connect for a new connection, then call `admitted` with the variables
 * set-vars left for later phases; when the policy closes the connection (deny, close-connection,
 * restrict-ips), destroy the socket instead. A policy that fails to run closes too: a gate that
 * cannot decide stays shut. Synchronous unless the policy has to wait (IP policy lookups), and
 * free for routes without a policy or without this phase.
 */
function runTcpConnect(
  policy: TunnelPolicy | undefined,
  socket: Duplex,
  conn: () => ConnInput,
  admitted: (vars: PolicyVars, forwardInternal?: ForwardInternal) => void,
  terminateTls?: TlsTerminator,
): void {
  if (!policy || !policy.runner.policy.has('on_tcp_connect')) {
    admitted(NO_VARS);
    return;
  }
  const apply = (decision: TcpConnectDecision): void => {
    if (decision.kind === 'close') socket.destroy();
    else if (!socket.destroyed) admitted(decision.vars, decision.forwardInternal);
  };
  const decision = tcpConnectDecision(policy, conn(), terminateTls);
  if (decision === undefined) socket.destroy();
  else if (decision instanceof Promise) decision.then(apply, () => socket.destroy());
  else apply(decision);
}
