import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { AcceptQueue } from '../muxado/accept-queue.js';
import { MuxError } from '../muxado/errors.js';
import { ErrorCode } from '../muxado/frame.js';
import { readExactly } from './reader.js';
import type { MuxSession } from '../muxado/session.js';
import type { MuxStream } from '../muxado/stream.js';

/**
 * Typed streams (docs/protocol.md §4): the opener's first 4 bytes are a big-endian uint32
 * stream type. Type 0xFFFFFFFF is the heartbeat: the opener writes 4-byte nonces and the other
 * side echoes them.
 */
export const HEARTBEAT_STREAM_TYPE = 0xffffffff;

/**
 * Open a stream and write its type, plus `payload` if given, in one write so the type travels in
 * the SYN frame (Go reads it with a single Read).
 * @example const auth = openTypedStream(session, StreamType.Auth, Buffer.from(JSON.stringify(req)));
 */
export function openTypedStream(session: MuxSession, type: number, payload?: Buffer): MuxStream {
  const stream = session.openStream();
  const head = Buffer.allocUnsafe(4 + (payload?.length ?? 0));
  head.writeUInt32BE(type >>> 0, 0);
  payload?.copy(head, 4);
  stream.write(head);
  return stream;
}

/**
 * Echo every 4-byte heartbeat nonce back on `stream` until it ends. The complete nonces of each
 * chunk go out in one write, and reading pauses while the echoes are not taken: a peer that sends
 * nonces and never reads the answers is then held to one flow-control window, instead of making
 * us queue echoes without bound. `onBeat` is called for each chunk received (the edge re-arms its
 * liveness deadline there), from the same listener.
 * @example echoHeartbeats(stream, () => deadline.refresh())
 */
export function echoHeartbeats(stream: MuxStream, onBeat?: () => void): void {
  // The echo is the answer; a probe for the peer's credit for it would be a second write a beat.
  stream.withoutAckProbes = true;
  // A nonce split across chunks (never by our agents, possible on the wire): its first bytes.
  let partial: Buffer | undefined;
  stream.on('data', (chunk: Buffer) => {
    onBeat?.();
    const data = partial ? Buffer.concat([partial, chunk]) : chunk;
    const whole = data.length - (data.length % 4);
    partial = whole < data.length ? Buffer.from(data.subarray(whole)) : undefined;
    if (whole === 0) return;
    // A copy: the chunk may be a view of a read buffer the transport reuses before the echo is
    // written on the next turn.
    if (!stream.write(Buffer.from(data.subarray(0, whole)))) {
      stream.pause();
      stream.once('drain', () => stream.resume());
    }
  });
  stream.on('end', () => stream.end());
  stream.on('error', () => {
    // The session reports its own end; a dead heartbeat stream needs nothing more.
  });
}

export interface HeartbeatOptions {
  /** Milliseconds between nonces (default 10 s, like the SDKs). */
  interval?: number;
  /** Extra milliseconds an echo may take before the session is declared dead (default 15 s). */
  tolerance?: number;
  /** Destroy the session when the peer stops answering (default true). */
  closeOnTimeout?: boolean;
}

/**
 * Heartbeat requester: opens a heartbeat stream, sends a random nonce at once and then every
 * `interval` (never more than one outstanding), and measures the echo latency. With no echo for
 * `interval + tolerance` it emits 'timeout' and, by default, destroys the session.
 *
 * Events: 'beat' (latency in ms), 'timeout'.
 *
 * @example
 * const heartbeat = new Heartbeat(session, { interval: 10_000, tolerance: 15_000 });
 * heartbeat.on('beat', (ms) => log.debug({ ms }, 'heartbeat'));
 * heartbeat.start();
 */
export class Heartbeat extends EventEmitter {
  /** Latency of the last echo, in milliseconds. */
  latency: number | undefined;
  private stream: MuxStream | undefined;
  private readonly interval: number;
  private readonly tolerance: number;
  private ticker: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private outstanding: Buffer | undefined;
  private sentAt = 0;
  private received: Buffer = Buffer.alloc(0);
  private stopped = false;

  constructor(
    private readonly session: MuxSession,
    private readonly options: HeartbeatOptions = {},
  ) {
    super();
    this.interval = options.interval ?? 10_000;
    this.tolerance = options.tolerance ?? 15_000;
  }

  start(): void {
    if (this.stream || this.stopped) return;
    this.outstanding = randomBytes(4);
    this.sentAt = performance.now();
    const stream = openTypedStream(this.session, HEARTBEAT_STREAM_TYPE, this.outstanding);
    this.stream = stream;
    stream.on('data', (chunk: Buffer) => this.onEcho(chunk));
    stream.on('error', () => {
      // Liveness is judged by the deadline; the session reports its own failure.
    });
    this.ticker = setInterval(() => this.send(), this.interval).unref();
    this.armDeadline();
    this.session.once('close', () => this.stop());
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.ticker);
    clearTimeout(this.deadline);
    if (this.stream && !this.stream.destroyed) this.stream.destroy();
  }

  private send(): void {
    if (this.outstanding || this.stopped || !this.stream) return;
    this.outstanding = randomBytes(4);
    this.sentAt = performance.now();
    this.stream.write(this.outstanding);
  }

  private onEcho(chunk: Buffer): void {
    this.received = this.received.length > 0 ? Buffer.concat([this.received, chunk]) : chunk;
    while (this.received.length >= 4) {
      const echo = this.received.subarray(0, 4);
      this.received = this.received.subarray(4);
      if (!this.outstanding || !echo.equals(this.outstanding)) {
        this.fail('heartbeat echo did not match the nonce');
        return;
      }
      this.outstanding = undefined;
      this.latency = performance.now() - this.sentAt;
      this.armDeadline();
      this.emit('beat', this.latency);
    }
  }

  private armDeadline(): void {
    clearTimeout(this.deadline);
    this.deadline = setTimeout(
      () => this.fail('no heartbeat echo in time'),
      this.interval + this.tolerance,
    ).unref();
  }

  private fail(why: string): void {
    if (this.stopped) return;
    this.stop();
    this.emit('timeout');
    if (this.options.closeOnTimeout ?? true) {
      this.session.destroy(new MuxError(ErrorCode.Protocol, why));
    }
  }
}

/** A peer-opened stream with its type read off. */
export interface TypedStream {
  type: number;
  stream: MuxStream;
}

export interface TypedSessionOptions {
  /** Echo heartbeats on peer-opened heartbeat streams (default true; the edge must, at once). */
  answerHeartbeats?: boolean;
  /** Typed streams queued for accept() when nobody listens to 'stream' (default 128). */
  acceptBacklog?: number;
  /** How long a new stream may take to send its type before it is reset (default 10 s). */
  typeTimeoutMs?: number;
}

/**
 * Typed streams over a MuxSession: reads each new stream's type, answers heartbeats itself, and
 * hands the rest out through 'stream' (stream, type) or accept().
 *
 * @example
 * const typed = new TypedSession(session);
 * typed.on('stream', (stream, type) => { if (type === StreamType.Auth) void handleAuth(stream); });
 */
export class TypedSession extends EventEmitter {
  private readonly accepted: AcceptQueue<TypedStream>;

  constructor(
    readonly session: MuxSession,
    private readonly options: TypedSessionOptions = {},
  ) {
    super();
    this.accepted = new AcceptQueue(options.acceptBacklog ?? 128);
    session.on('stream', (stream: MuxStream) => void this.classify(stream));
    session.once('close', (reason: Error | undefined) => {
      const err = reason ?? new MuxError(ErrorCode.SessionClosed, 'session closed');
      for (const left of this.accepted.close(err)) left.stream.destroy();
    });
  }

  /** Open a typed stream; see openTypedStream. */
  open(type: number, payload?: Buffer): MuxStream {
    return openTypedStream(this.session, type, payload);
  }

  accept(): Promise<TypedStream> {
    return this.accepted.take();
  }

  /**
   * Start a heartbeat requester on this session.
   * @example typed.startHeartbeat({ interval: 10_000, tolerance: 15_000 }).on('timeout', reconnect)
   */
  startHeartbeat(options?: HeartbeatOptions): Heartbeat {
    const heartbeat = new Heartbeat(this.session, options);
    heartbeat.start();
    return heartbeat;
  }

  private async classify(stream: MuxStream): Promise<void> {
    let type: number;
    try {
      const head = await readExactly(stream, 4, this.options.typeTimeoutMs ?? 10_000);
      type = head.readUInt32BE(0);
    } catch {
      stream.reset(ErrorCode.Protocol);
      return;
    }
    if (type === HEARTBEAT_STREAM_TYPE && (this.options.answerHeartbeats ?? true)) {
      echoHeartbeats(stream);
    } else if (this.listenerCount('stream') > 0) {
      this.emit('stream', stream, type);
    } else if (!this.accepted.offer({ type, stream })) {
      stream.reset(ErrorCode.AcceptQueueFull);
    }
  }
}
