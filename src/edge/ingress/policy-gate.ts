/**
 * on_tcp_connect for the raw listeners (TCP endpoints, TLS passthrough): the connection's
 * `conn.*` variables, and the gate that lets a connection through to its tunnel or closes it.
 */
import type { Duplex } from 'node:stream';
import type {
  ConnInput,
  ForwardInternal,
  PolicyVars,
  TcpConnectDecision,
  TlsInput,
  TlsTerminator,
} from '../../policy/index.js';
import { clientIp } from '../registry/connect-tunnel.js';
import type { TunnelPolicy } from '../registry/tunnel-registry.js';

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
 * Run `policy`'s on_tcp_connect for a new connection, then call `admitted` with the variables
 * set-vars left for later phases; when the policy closes the connection (deny, close-connection,
 * restrict-ips), destroy the socket instead. A policy that fails to run closes too: a gate that
 * cannot decide stays shut. Synchronous unless the policy has to wait (IP policy lookups), and
 * free for tunnels without a policy or without this phase. `terminateTls` is how the ingress
 * ends TLS for terminate-tls (TLS endpoints); without it that action closes the connection.
 * @example admitConnection(tunnel.policy, socket, () => connInputOf(socket), () => relay(socket));
 */
export function admitConnection(
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
  let decision: TcpConnectDecision | Promise<TcpConnectDecision>;
  try {
    decision = policy.runner.onTcpConnect({
      conn: conn(),
      endpoint: policy.endpoint,
      terminateTls,
    });
  } catch {
    socket.destroy();
    return;
  }
  if (decision instanceof Promise) decision.then(apply, () => socket.destroy());
  else apply(decision);
}
