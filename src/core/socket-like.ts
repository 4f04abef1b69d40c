/**
 * A stream made to look enough like an accepted `net.Socket` for Node's HTTP server and client:
 * tunnel streams (muxado) carry HTTP on both sides of a tunnel, and Node's http module calls
 * socket methods that a plain Duplex lacks. One shim for the edge (Node's http client over tunnel
 * streams) and the SDK (Node's http server on proxied streams).
 */
import { isIPv6 } from 'node:net';
import type { Duplex } from 'node:stream';
import { parseHostPort } from './host-port.js';

/** The socket members Node's http module uses that a Duplex may lack. */
export interface SocketLike {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
  remoteFamily?: string | undefined;
  setTimeout(ms: number, callback?: () => void): unknown;
  setNoDelay(noDelay?: boolean): unknown;
  setKeepAlive(enable?: boolean, delay?: number): unknown;
  ref(): unknown;
  unref(): unknown;
}

/**
 * Give `stream` the socket methods it lacks (a real socket keeps its own): a working idle
 * `setTimeout` (HTTP servers use it for keep-alive), no-op `setNoDelay`, `setKeepAlive`, `ref` and
 * `unref`, and, when `clientAddr` (`ip:port`) is given, the client's `remoteAddress` and port.
 * @example http.createServer().emit('connection', asSocket(stream, '203.0.113.7:45678'));
 */
export function asSocket<T extends Duplex>(stream: T, clientAddr?: string): T & SocketLike {
  const target = stream as T & Partial<SocketLike>;
  if (clientAddr !== undefined) {
    const address = parseHostPort(clientAddr, { port: 'optional' });
    const ip = address?.host ?? clientAddr;
    target.remoteAddress = ip;
    target.remotePort = address?.port;
    target.remoteFamily = isIPv6(ip) ? 'IPv6' : 'IPv4';
  }
  target.setTimeout ??= idleTimeout(stream);
  target.setNoDelay ??= () => stream;
  target.setKeepAlive ??= () => stream;
  target.ref ??= () => stream;
  target.unref ??= () => stream;
  return target as T & SocketLike;
}

/** `setTimeout(ms, callback)` as a socket has it: 'timeout' after `ms` without incoming data. */
function idleTimeout(stream: Duplex): SocketLike['setTimeout'] {
  let idleMs = 0;
  let timer: NodeJS.Timeout | undefined;
  let watching = false;
  const arm = (): void => {
    clearTimeout(timer);
    if (idleMs > 0 && !stream.destroyed) {
      timer = setTimeout(() => stream.emit('timeout'), idleMs);
      timer.unref();
    }
  };
  stream.once('close', () => clearTimeout(timer));
  return (ms, callback) => {
    idleMs = ms;
    if (callback) stream.once('timeout', callback);
    if (ms > 0 && !watching) {
      watching = true;
      stream.on('data', arm);
    }
    arm();
    return stream;
  };
}
