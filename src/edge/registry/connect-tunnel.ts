/**
 * Reaching an agent for one public connection: the client's address as the agent protocol
 * writes it (the ProxyHeader's ClientAddr), and opening a tunnel stream with a deadline.
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import { formatHostPort } from '../../core/host-port.js';
import { trackStream, type OnlineTunnel, type ProxyInfo } from './tunnel-registry.js';

/** Default wait for `tunnel.connect()` before the public side is answered with an error. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The client's IP without the IPv4-mapped prefix Node gives dual-stack sockets.
 * @example clientIp({ remoteAddress: '::ffff:203.0.113.7' }) // '203.0.113.7'
 */
export function clientIp(socket: { remoteAddress?: string | undefined }): string {
  const ip = socket.remoteAddress ?? '';
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

/**
 * `ip:port` as the ProxyHeader's ClientAddr carries it (IPv6 in brackets).
 * @example clientAddr(socket) // '203.0.113.7:45678' or '[2001:db8::1]:45678'
 */
export function clientAddr(socket: {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
}): string {
  return formatHostPort(clientIp(socket), socket.remotePort ?? 0);
}

/**
 * `ip:port` the public client connected to (the socket's local side), for PROXY protocol headers
 * (ProxyInfo.serverAddr); undefined when the socket does not know (e.g. a test's Duplex).
 * @example serverAddr(socket) // '10.0.0.1:443'
 */
export function serverAddr(socket: {
  localAddress?: string | undefined;
  localPort?: number | undefined;
}): string | undefined {
  if (!socket.localAddress || socket.localPort === undefined) return undefined;
  return formatHostPort(clientIp({ remoteAddress: socket.localAddress }), socket.localPort);
}

/**
 * What the agent is told of a public connection to an endpoint (the ProxyHeader, and the PROXY
 * protocol header of endpoints bound with ProxyProto): the client's and the server's address,
 * the public protocol, and whether the bytes are the client's own TLS. Edges' routes add their
 * EdgeType themselves.
 * @example connectTunnel(tunnel, proxyInfoOf(socket, 'https', false))
 */
export function proxyInfoOf(socket: Duplex, proto: string, passthroughTls: boolean): ProxyInfo {
  // A net or TLS socket has the addresses; a test's bare Duplex has none (undefined then).
  const addresses = socket as Duplex &
    Partial<Pick<Socket, 'remoteAddress' | 'remotePort'>> &
    Partial<Pick<Socket, 'localAddress' | 'localPort'>>;
  return {
    clientAddr: clientAddr(addresses),
    serverAddr: serverAddr(addresses),
    proto,
    edgeType: '',
    passthroughTls,
  };
}

/** Thrown when a tunnel did not hand over a stream in time. */
export class TunnelConnectTimeoutError extends BurrowError {
  constructor(ms: number) {
    super(
      CODES.tunnelConnectTimeout,
      502,
      `the agent did not accept the connection within ${ms} ms`,
    );
  }
}

/**
 * `tunnel.connect(info)`, failing after `timeoutMs`. A stream that arrives after the deadline is
 * destroyed, so the agent is not left holding a connection nobody reads.
 * @example const stream = await connectTunnel(tunnel, info, 10_000);
 */
export function connectTunnel(
  tunnel: OnlineTunnel,
  info: ProxyInfo,
  timeoutMs = DEFAULT_CONNECT_TIMEOUT_MS,
): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new TunnelConnectTimeoutError(timeoutMs));
    }, timeoutMs);
    let pending: Promise<Duplex>;
    try {
      pending = tunnel.connect(info);
    } catch (err) {
      pending = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    pending.then(
      (stream) => {
        clearTimeout(timer);
        if (settled) {
          stream.destroy();
        } else {
          trackStream(tunnel, stream);
          resolve(stream);
        }
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (!settled) reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
