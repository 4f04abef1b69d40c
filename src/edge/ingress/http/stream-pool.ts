/**
 * Idle tunnel streams kept between public connections, so a client that opens a connection per
 * request does not cost the agent a new stream and a new connection to its service each time.
 * Streams are kept per tunnel, public protocol and client IP: the ClientAddr the agent was told
 * when a stream opened stays the client's own.
 *
 * An idle stream has nothing more to say: its end (agents half-close when the service closes an
 * idle keep-alive connection) or any byte means it is finished, and it is dropped at once.
 */
import type { Duplex } from 'node:stream';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';

export interface StreamPoolOptions {
  /** A stream unused this long is closed. Default 15 s. */
  idleMs?: number | undefined;
  /** Idle streams kept per tunnel and client. Default 32. */
  maxPerClient?: number | undefined;
}

interface Parked {
  stream: Duplex;
  timer: NodeJS.Timeout;
  drop: () => void;
}

/**
 * @example
 * const pool = new StreamPool();
 * const stream = pool.take(tunnel, 'http 203.0.113.7') ?? (await connectTunnel(tunnel, info));
 * pool.put(tunnel, 'http 203.0.113.7', stream); // when the exchange is done and the stream clean
 */
export class StreamPool {
  private readonly idle = new Map<OnlineTunnel, Map<string, Parked[]>>();
  /**
   * Tunnels gone offline: a stream an exchange gives back after that (an HTTP/2 exchange holds
   * one only while it runs) is closed, not kept for a tunnel nobody routes to.
   */
  private readonly retired = new WeakSet<OnlineTunnel>();
  private readonly idleMs: number;
  private readonly maxPerClient: number;

  constructor(options: StreamPoolOptions = {}) {
    this.idleMs = options.idleMs ?? 15_000;
    this.maxPerClient = options.maxPerClient ?? 32;
  }

  /** An idle stream of `tunnel` for `key`, taken out of the pool, or undefined. */
  take(tunnel: OnlineTunnel, key: string): Duplex | undefined {
    const parked = this.idle.get(tunnel)?.get(key)?.pop();
    if (!parked) return undefined;
    this.unpark(parked);
    return parked.stream;
  }

  /** Keep `stream` for the next connection of the same client, unless it is spent. */
  put(tunnel: OnlineTunnel, key: string, stream: Duplex): void {
    if (
      stream.destroyed ||
      stream.readableEnded ||
      stream.writableEnded ||
      this.retired.has(tunnel)
    ) {
      stream.destroy();
      return;
    }
    let byKey = this.idle.get(tunnel);
    if (!byKey) {
      byKey = new Map();
      this.idle.set(tunnel, byKey);
    }
    let list = byKey.get(key);
    if (!list) {
      list = [];
      byKey.set(key, list);
    }
    if (list.length >= this.maxPerClient) {
      stream.destroy();
      return;
    }
    const parked: Parked = {
      stream,
      timer: setTimeout(() => drop(), this.idleMs),
      drop: () => drop(),
    };
    const drop = (): void => {
      this.unpark(parked);
      const at = list.indexOf(parked);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) byKey.delete(key);
      if (byKey.size === 0) this.idle.delete(tunnel);
      stream.destroy();
    };
    parked.timer.unref();
    // A parked stream fails with its session; the failure only means it is dropped.
    stream.once('error', parked.drop);
    stream.once('end', parked.drop);
    stream.once('data', parked.drop);
    stream.once('close', parked.drop);
    // Flowing, so that a FIN or a stray byte is seen while the stream waits.
    stream.resume();
    list.push(parked);
  }

  /** The tunnel went offline: close its idle streams. */
  retire(tunnel: OnlineTunnel): void {
    this.retired.add(tunnel);
    const byKey = this.idle.get(tunnel);
    if (!byKey) return;
    this.idle.delete(tunnel);
    for (const list of byKey.values()) {
      for (const parked of list.splice(0)) {
        this.unpark(parked);
        parked.stream.destroy();
      }
    }
  }

  /** Close every idle stream. */
  destroyAll(): void {
    for (const tunnel of [...this.idle.keys()]) this.retire(tunnel);
  }

  private unpark(parked: Parked): void {
    clearTimeout(parked.timer);
    parked.stream.off('error', parked.drop);
    parked.stream.off('end', parked.drop);
    parked.stream.off('data', parked.drop);
    parked.stream.off('close', parked.drop);
    parked.stream.pause();
  }
}
