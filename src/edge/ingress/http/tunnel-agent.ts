/**
 * An http.Agent whose "connections" are tunnel streams. Finished streams are kept and reused for
 * the next request (HTTP/1.1 keep-alive through the tunnel), which saves opening a stream and the
 * agent's connection to its service on every request.
 *
 * A pooled stream is dropped as soon as the agent ends it: agents half-close their stream when
 * the local service closes an idle keep-alive connection (Node does after 5 s), and streams are
 * half-open Duplexes, so neither Node's Agent ('close' only) nor `socket.writable` notices.
 */
import { parseHostPort } from '../../../core/host-port.js';
import { asSocket } from '../../../core/socket-like.js';
import { Agent, type ClientRequest, type ClientRequestArgs } from 'node:http';
import type { Duplex } from 'node:stream';
import type { CounterSeries } from '../../metrics/metrics.js';
import { connectTunnel, DEFAULT_CONNECT_TIMEOUT_MS } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../../registry/tunnel-registry.js';
import { releaseAbandonedRequest } from './stream-release.js';

/** Request options that say for whom a stream is opened. */
export interface TunnelRequestArgs extends ClientRequestArgs {
  proxyInfo: ProxyInfo;
}

export interface TunnelAgentOptions {
  connectTimeoutMs?: number;
  /** A stream unused this long is closed. Default 15 s. */
  idleMs?: number;
  /** Idle streams kept per client address. Default 256. */
  maxIdlePerClient?: number;
  /** Counts streams given up because their client left before the exchange ended. */
  released?: CounterSeries | undefined;
}

/**
 * The pool of keep-alive tunnel streams for one tunnel. Streams are pooled per public protocol and
 * client IP, so the ClientAddr the agent was told when a stream opened stays the client's own;
 * per client IP and port when the tunnel sends PROXY protocol headers (OnlineTunnel.proxyProto).
 * @example
 * const agent = new TunnelAgent(tunnel);
 * http.request({ agent, path: '/', headers, proxyInfo } as TunnelRequestArgs);
 */
export class TunnelAgent extends Agent {
  private readonly idleTimers = new WeakMap<Duplex, NodeJS.Timeout>();
  private readonly idleWatchers = new WeakMap<Duplex, () => void>();
  private readonly connectTimeoutMs: number;
  private readonly idleMs: number;
  private readonly released: CounterSeries | undefined;
  private retired = false;

  constructor(
    readonly tunnel: OnlineTunnel,
    options: TunnelAgentOptions = {},
  ) {
    super({ keepAlive: true, maxFreeSockets: options.maxIdlePerClient ?? 256, scheduling: 'lifo' });
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.idleMs = options.idleMs ?? 15_000;
    this.released = options.released;
  }

  override getName(options?: ClientRequestArgs): string {
    const info = (options as TunnelRequestArgs | undefined)?.proxyInfo;
    if (!info) return '';
    // A PROXY protocol header (ProxyProto) names the client's port too: such a stream serves
    // only the public connection it was opened for.
    if (this.tunnel.proxyProto) return `${info.proto} ${info.clientAddr}`;
    return `${info.proto} ${parseHostPort(info.clientAddr)?.host ?? info.clientAddr}`;
  }

  override createConnection(
    options: ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const { proxyInfo } = options as TunnelRequestArgs;
    connectTunnel(this.tunnel, proxyInfo, this.connectTimeoutMs).then(
      (stream) => callback?.(null, asSocket(stream)),
      // Node's callback type has no error-only form; the stream argument is ignored on error.
      (err: unknown) => callback?.(err as Error, undefined as unknown as Duplex),
    );
    return undefined;
  }

  override keepSocketAlive(socket: Duplex): boolean {
    // The agent may have ended the stream right behind the response it just finished.
    if (this.retired || socket.readableEnded || socket.destroyed) return false;
    const timer = setTimeout(() => socket.destroy(), this.idleMs);
    timer.unref();
    this.idleTimers.set(socket, timer);
    // An idle stream has nothing more to say: its end (or stray bytes) means it is finished.
    // Destroying it fires 'close', on which Node's Agent takes it out of the pool.
    const drop = (): void => {
      socket.destroy();
    };
    socket.once('end', drop);
    socket.once('data', drop);
    this.idleWatchers.set(socket, drop);
    // The HTTP client removed its 'data' listener; make sure a FIN is still read and seen.
    socket.resume();
    return true;
  }

  override reuseSocket(socket: Duplex, request: ClientRequest): void {
    clearTimeout(this.idleTimers.get(socket));
    this.idleTimers.delete(socket);
    const drop = this.idleWatchers.get(socket);
    if (drop) {
      socket.off('end', drop);
      socket.off('data', drop);
      this.idleWatchers.delete(socket);
    }
    super.reuseSocket(socket, request);
  }

  /**
   * The tunnel went offline: close idle streams now and each busy one when its request is done,
   * so requests in flight still finish.
   */
  retire(): void {
    this.retired = true;
    for (const sockets of Object.values(this.freeSockets)) {
      for (const socket of sockets ?? []) socket.destroy();
    }
  }

  /**
   * The public client of `request` left before its whole answer: its stream, mid-message, is given
   * up at once (FIN, then RST: stream-release.ts) and counted. A request still waiting for its
   * stream is destroyed; the stream, unused, comes back to the pool.
   */
  abandon(request: ClientRequest): void {
    releaseAbandonedRequest(request, this.released);
  }

  /** Close the idle streams kept for `proxyInfo`'s client (e.g. after one of them failed). */
  dropIdle(proxyInfo: ProxyInfo): void {
    const name = this.getName({ proxyInfo } as TunnelRequestArgs);
    for (const socket of this.freeSockets[name] ?? []) socket.destroy();
  }
}
