/**
 * What a traffic policy knows of one public connection (HTTP/1.x or HTTP/2): its `conn.*`
 * variables, read once, and each endpoint's on_tcp_connect outcome, decided at the connection's
 * first request to that endpoint (when the Host has said which endpoint it is for).
 */
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { ConnInput, PolicyVars, TcpConnectDecision } from '../../../policy/index.js';
import type { TunnelPolicy } from '../../registry/tunnel-registry.js';
import { connInputOf } from '../policy-gate.js';

/** A value now, or once a decision that waits (an IP policy lookup, a key fetch) is made. */
export type Settled<T> = T | Promise<T>;

/** What the policy knows of a public connection: its variables, and what each on_tcp_connect left. */
export interface ConnectionPolicyState {
  conn: ConnInput;
  /** The variables on_tcp_connect left, per endpoint policy that let the connection in. */
  admitted: Map<TunnelPolicy, PolicyVars>;
  /** on_tcp_connect decisions still waiting, or that closed the connection (http-policy-lean.ts). */
  decided: Map<TunnelPolicy, Settled<TcpConnectDecision>>;
}

const connections = new WeakMap<Duplex, ConnectionPolicyState>();

/**
 * The policy state of a public connection, made at its first use.
 * @example const { conn } = connectionState(socket);
 */
export function connectionState(socket: Duplex): ConnectionPolicyState {
  let state = connections.get(socket);
  if (!state) {
    const tls = socket as Partial<TLSSocket>;
    const encrypted = tls.encrypted === true;
    state = {
      conn: connInputOf(
        socket as TLSSocket,
        encrypted
          ? {
              version: tls.getProtocol?.() ?? undefined,
              cipher_suite: tls.getCipher?.()?.standardName,
              sni: typeof tls.servername === 'string' ? tls.servername : undefined,
              negotiated_alpn: typeof tls.alpnProtocol === 'string' ? tls.alpnProtocol : undefined,
              session_resumed: tls.isSessionReused?.(),
            }
          : undefined,
      ),
      admitted: new Map(),
      decided: new Map(),
    };
    connections.set(socket, state);
  }
  return state;
}
