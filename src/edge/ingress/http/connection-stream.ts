/**
 * A lean relay connection's state and its hold on a tunnel stream. A public connection keeps one
 * stream while both sides keep alive, parks it in the pool when it closes (for the next connection
 * of the same client) and drops it when it can no longer be trusted; this is where a stream is
 * opened, adopted, parked and dropped.
 *
 * It is the first layer of HttpConnection (http-connection.ts), under the response side
 * (response-relay.ts): the layers are classes, not objects calling each other, so the connection
 * stays one object with one shape and its calls stay plain method calls.
 */
import type { Duplex } from 'node:stream';
import { clientIp, connectTunnel, proxyInfoOf } from '../../registry/connect-tunnel.js';
import { failureDetail } from '../error-pages.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { CloseFramer, type Exchange } from './exchange.js';
import { H2Bridge } from './h2-bridge.js';
import { publicProto } from './http-forwarding.js';
import type { HttpRelayContext } from './http-relay.js';
import { LengthFramer } from './body-framing.js';
import { releaseAbandoned } from './stream-release.js';

/** A tunnel stream that takes back chunks its reader is done with (MuxStream). */
interface Releasing {
  release(chunk: Buffer): void;
}

export const enum Phase {
  /** Reading a request head (or idle between requests). */
  Head,
  /** The head is read; a policy's decision on it is awaited (jwt-validation). */
  Routing,
  /** Waiting for a tunnel stream. */
  Connecting,
  /** Relaying a request body. */
  Body,
  /** The request is sent; waiting for the rest of the response. */
  Waiting,
  Closed,
}

/** `b` after `a`, copying only when there is something to put before it. */
export function concat(a: Buffer | undefined, b: Buffer): Buffer {
  return a === undefined || a.length === 0 ? b : Buffer.concat([a, b]);
}

export abstract class ConnectionStream {
  protected phase = Phase.Head;
  /** Public bytes read and not yet served (a partial head, pipelined requests). */
  protected buffered: Buffer | undefined;
  protected exchange: Exchange | undefined;
  protected stream: Duplex | undefined;
  protected streamTunnel: OnlineTunnel | undefined;
  protected streamError: string | undefined;
  /** The stream refused a write: reading the client waits for its 'drain' (one listener). */
  protected streamFull = false;
  /** The stream's tunnel went offline: the stream closes once the exchange under way ends. */
  protected streamRetired = false;
  protected clientEnded = false;
  /** The public socket is corked for the response body chunks of this turn. */
  private corkedForTurn = false;
  /** Body chunks written this turn, to release to their stream once the socket took them. */
  private written: Buffer[] = [];
  private writtenTo: Releasing[] = [];
  protected readonly proto: 'http' | 'https';
  protected readonly ip: string;
  private readonly poolKey: string;

  constructor(
    protected readonly socket: Duplex,
    protected readonly ctx: HttpRelayContext,
  ) {
    this.proto = publicProto(socket);
    this.ip = clientIp(socket as { remoteAddress?: string });
    this.poolKey = `${this.proto} ${this.ip}`;
  }

  /** Write the request head of `exchange` into the stream, then relay its body. */
  protected abstract send(exchange: Exchange): void;
  /** Answer 502 for `exchange` (or break the response if it has begun) and close. */
  protected abstract badGateway(exchange: Exchange, detail: string): void;
  protected abstract readonly onStreamData: (chunk: Buffer) => void;
  protected abstract readonly onStreamEnd: () => void;
  protected abstract readonly onStreamClose: () => void;
  protected abstract readonly onStreamError: (err: NodeJS.ErrnoException) => void;

  /** A tunnel went offline: its stream closes now, or after the exchange under way. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    if (this.streamTunnel !== tunnel) return;
    if (this.exchange) this.streamRetired = true;
    else this.dropStream();
  }

  /**
   * Send `exchange` on the stream held, when it is to the same tunnel and still open, or on an
   * idle one of the pool; otherwise open a fresh one.
   */
  protected sendOnStream(exchange: Exchange): void {
    const tunnel = exchange.tunnel;
    const stream = this.stream;
    if (stream && this.streamTunnel === tunnel && !stream.readableEnded && !stream.destroyed) {
      exchange.reused = true;
      this.send(exchange);
      return;
    }
    this.parkStream();
    // A stream of a ProxyProto tunnel began with another connection's PROXY header: never reused.
    const pooled = tunnel.proxyProto ? undefined : this.ctx.pool.take(tunnel, this.poolKey);
    if (pooled) {
      exchange.reused = true;
      this.adopt(pooled, tunnel);
      this.send(exchange);
      return;
    }
    this.connect(exchange);
  }

  /** Open a fresh stream for `exchange`, then send it. */
  protected connect(exchange: Exchange): void {
    this.phase = Phase.Connecting;
    this.socket.pause();
    const info = proxyInfoOf(this.socket, this.proto, false);
    const { tunnel } = exchange;
    // A service that speaks HTTP/2 gets the request as an HTTP/2 call (h2-bridge.ts).
    const opening =
      tunnel.appProtocol === 'http2'
        ? Promise.resolve<Duplex>(new H2Bridge(this.ctx.h2Upstreams, tunnel, this.socket, info))
        : connectTunnel(tunnel, info, this.ctx.connectTimeoutMs);
    opening.then(
      (stream) => {
        if (this.exchange !== exchange) {
          // The client left while the stream opened; the agent may have dialled its service.
          releaseAbandoned(stream, this.ctx.released);
          return;
        }
        this.adopt(stream, exchange.tunnel);
        this.send(exchange);
      },
      (err: NodeJS.ErrnoException) => {
        if (this.exchange === exchange) this.badGateway(exchange, failureDetail(err));
      },
    );
  }

  private adopt(stream: Duplex, tunnel: OnlineTunnel): void {
    this.stream = stream;
    this.streamTunnel = tunnel;
    this.streamError = undefined;
    this.streamRetired = false;
    this.streamFull = false;
    // Kept for the stream's whole life: a stream let go of (parked, dropped) may still fail when
    // its session does, and an 'error' without a listener would end the process.
    if (!stream.listeners('error').includes(ignoreError)) stream.on('error', ignoreError);
    stream.on('data', this.onStreamChunk);
    stream.on('end', this.onStreamEnd);
    stream.on('close', this.onStreamClose);
    stream.on('error', this.onStreamError);
    stream.resume();
  }

  /**
   * A chunk from the stream. The body chunks one turn brings (a muxado session parses what a
   * turn read at once: a stream gets several DATA frames in a row, 8 KiB each from ngrok's
   * agents) go to the client in one write: the socket is corked until the next tick. A body
   * chunk the relay only writes to the client (framed by length or by the close, no transforms,
   * no capture) is released to the stream once that write has left nothing behind in the
   * socket, so that its memory is read into again (MuxStream.release).
   */
  private readonly onStreamChunk = (chunk: Buffer): void => {
    const exchange = this.exchange;
    const body = exchange?.responseBody;
    if (body && !this.corkedForTurn) {
      this.corkedForTurn = true;
      this.socket.cork();
      process.nextTick(this.uncorkTurn);
    }
    this.onStreamData(chunk);
    if (
      body !== undefined &&
      this.corkedForTurn &&
      (body instanceof LengthFramer || body instanceof CloseFramer) &&
      !exchange!.transforms &&
      !exchange!.bodies &&
      typeof (this.stream as unknown as Releasing | undefined)?.release === 'function'
    ) {
      this.written.push(chunk);
      this.writtenTo.push(this.stream as unknown as Releasing);
    }
  };

  private readonly uncorkTurn = (): void => {
    this.corkedForTurn = false;
    const socket = this.socket;
    socket.uncork();
    // The turn's back-pressure, judged once its writes went out: judged write by write, a socket
    // with 16 KiB of room paused the stream after two of ngrok's 8 KiB frames, or after each of
    // the SDK's 64 KiB ones, and resumed it on the next tick, every turn.
    if (socket.writableLength >= socket.writableHighWaterMark && !socket.destroyed) {
      this.waitForDrain();
    }
    const written = this.written;
    if (written.length === 0) return;
    const to = this.writtenTo;
    this.written = [];
    this.writtenTo = [];
    // Written through to the kernel, nothing left in the socket: no one holds these bytes.
    if (this.socket.destroyed || this.socket.writableLength > 0) return;
    for (let i = 0; i < written.length; i++) to[i]!.release(written[i]!);
  };

  /** Whether the socket is corked for this turn's body writes (their back-pressure waits). */
  protected get corkedInTurn(): boolean {
    return this.corkedForTurn;
  }

  private readonly resumeStream = (): void => {
    this.stream?.resume();
  };

  /** Hold the stream until the socket has written what it holds. */
  protected waitForDrain(): void {
    this.stream?.pause();
    this.socket.once('drain', this.resumeStream);
  }

  /** Take the stream from this connection, without closing it. */
  protected release(): Duplex | undefined {
    const stream = this.stream;
    if (!stream) return undefined;
    stream.off('data', this.onStreamChunk);
    stream.off('end', this.onStreamEnd);
    stream.off('close', this.onStreamClose);
    stream.off('error', this.onStreamError);
    this.stream = undefined;
    return stream;
  }

  /**
   * Keep an idle stream for the next connection of this client; close it when it began with a
   * PROXY protocol header (ProxyProto), which names this connection only.
   */
  protected parkStream(): void {
    const tunnel = this.streamTunnel;
    const stream = this.release();
    if (stream && tunnel?.proxyProto) stream.destroy();
    else if (stream && tunnel) this.ctx.pool.put(tunnel, this.poolKey, stream);
  }

  protected dropStream(): void {
    this.release()?.destroy();
  }

  /**
   * The client left before the exchange ended: the stream is given up at once (FIN, then RST:
   * stream-release.ts) and counted, never parked.
   */
  protected abandonStream(): void {
    const stream = this.release();
    if (stream) releaseAbandoned(stream, this.ctx.released);
  }
}

/**
 * The error listener a tunnel stream keeps for its whole life, on every path that holds one: a
 * stream let go of (parked, dropped) may still fail when its session does.
 */
export function ignoreError(): void {}
