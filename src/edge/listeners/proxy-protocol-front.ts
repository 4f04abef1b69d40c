/**
 * PROXY protocol on a listener (`--ingress-proxy-protocol 1`): a front server that reads the
 * header a load balancer sends first, makes the socket report the client's address, and hands the
 * socket to the real server (HTTP ingress or SNI router), which then sees the real client in its
 * limits, IP policies, X-Forwarded-For, `conn.client_ip` and logs.
 */
import { createServer, type Server, type ServerOpts, type Socket } from 'node:net';
import {
  parseProxyProtocol,
  ProxyProtocolError,
  type ProxiedAddress,
} from '../../protocol/proxy-protocol.js';

export interface ProxyProtocolFrontOptions {
  /** The header must arrive this soon after connecting; otherwise the connection is closed. */
  timeoutMs: number;
  /** Told of each refused connection (no, bad or late header), with the peer's own address. */
  onRefused?: ((peer: string, reason: string) => void) | undefined;
  /**
   * Socket options of the inner server, applied here since the front accepts the sockets
   * (a TCP endpoint relays half-closed connections: `allowHalfOpen`).
   */
  socketOptions?: ServerOpts | undefined;
  /**
   * Hand the socket over paused. A `tls.Server` needs it: it takes the bytes after the header from
   * the socket's buffer a tick later, and a flowing socket would have emitted them to nobody.
   */
  handOverPaused?: boolean | undefined;
}

/** The native handle's peer lookup, which every socket over it (TLS included) asks. */
interface PeerHandle {
  getpeername?: (out: Record<string, unknown>) => number;
}

/**
 * Make `socket` and every socket later layered on it report `source` as its remote end. Node reads
 * `remoteAddress` through the native handle's getpeername (a TLSSocket over this socket asks the
 * same handle), so the handle's lookup is replaced; the socket's cached answer is cleared.
 */
function reportPeer(socket: Socket, source: ProxiedAddress): void {
  // Node internals: `_handle` and `_peername` are not in the typings.
  const internals = socket as unknown as { _handle?: PeerHandle | null; _peername?: unknown };
  const handle = internals._handle;
  if (handle) {
    handle.getpeername = (out) => {
      out.address = source.address;
      out.port = source.port;
      out.family = source.family;
      return 0;
    };
  }
  internals._peername = { address: source.address, port: source.port, family: source.family };
}

/**
 * A server to listen on in place of `inner`: each connection must start with a PROXY v1 or v2
 * header; a connection without a valid one within `timeoutMs` is closed (refused), since behind a
 * balancer a connection without it is someone bypassing the balancer, and trusting it would let
 * them pick their own client IP.
 * @example const front = proxyProtocolFront(http.server, { timeoutMs: 10_000 }); front.listen(8080);
 */
export function proxyProtocolFront(inner: Server, options: ProxyProtocolFrontOptions): Server {
  return createServer(options.socketOptions ?? {}, (socket) => {
    const peer = socket.remoteAddress ?? '';
    let buffered: Buffer = Buffer.alloc(0);
    const refuse = (reason: string): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      options.onRefused?.(peer, reason);
      socket.destroy();
    };
    const timer = setTimeout(() => refuse('no PROXY protocol header in time'), options.timeoutMs);
    timer.unref();
    const onData = (chunk: Buffer): void => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      let header;
      try {
        header = parseProxyProtocol(buffered);
      } catch (err) {
        if (err instanceof ProxyProtocolError) return refuse(err.message);
        throw err;
      }
      if (header === undefined) return;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      // Not paused: the inner server attaches its readers in this same tick (data events come
      // later), and one that pauses and resumes on its own (the SNI router) must find it flowing.
      if (header.source) reportPeer(socket, header.source);
      const rest = buffered.subarray(header.length);
      if (options.handOverPaused) socket.pause();
      if (rest.length > 0) socket.unshift(rest);
      inner.emit('connection', socket);
    };
    const onError = (): void => {
      clearTimeout(timer);
      socket.destroy();
    };
    socket.on('data', onData);
    socket.on('error', onError);
  });
}
