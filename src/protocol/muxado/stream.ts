import { Duplex } from 'node:stream';
import type { Writable } from 'node:stream';
import { ErrorCode, FrameFlag, FrameType, FRAME_HEADER_SIZE, encodeFrameHeader } from './frame.js';
import { MuxError } from './errors.js';
import type { SlabLender } from './slab-reads.js';

/** What a stream needs from its session; MuxSession implements it. */
export interface StreamHost {
  /** The stream has frames to send (data within its window, or a FIN). */
  scheduleSend(stream: MuxStream): void;
  /** The stream owes its peer credit: send a WNDINC for `stream.takeCredit()` on the next turn. */
  sendWindowUpdate(stream: MuxStream): void;
  sendReset(streamId: number, code: number): void;
  /** The stream needs no more frames routed to it. */
  forgetStream(stream: MuxStream): void;
  /** Nothing refers to `chunk`, a DATA chunk given to a stream, any more (SlabLender). */
  giveBack(chunk: Buffer): void;
  /**
   * The lender of what streams are given to write (MuxSessionOptions.sendLender): each payload
   * piece is given back to it once the transport has written it.
   */
  readonly sendLender: SlabLender | undefined;
}

/** Payloads up to this size are copied next to their header: one socket write instead of two. */
const COALESCE_BELOW = 2048;
/** Buffered chunks smaller than this, of a backing buffer at least PIN_BACKING_FROM, are copied. */
const PIN_COPY_BELOW = 16 * 1024;
const PIN_BACKING_FROM = 64 * 1024;

const enum Fin {
  None,
  Pending,
  Sent,
}

/**
 * One muxado stream, as a Node Duplex with allowHalfOpen: `end()` sends FIN (half-close),
 * `destroy()` sends RST (StreamCancelled) unless the stream already closed cleanly, and
 * `reset(code)` sends RST with a chosen code.
 *
 * Flow control: writes are framed only within the send window (the peer's receive window), and a
 * write's callback runs once its bytes are framed, so `write()` returns false and 'drain' waits
 * while the window is shut. Received data is buffered up to the receive window and credited back
 * with WNDINC as the application consumes it, in batches of at least `window / 4` and at most one
 * WNDINC per turn (the increment is read when the session writes it), so a slow reader holds at
 * most one window of memory per stream.
 *
 * @example
 * const stream = session.openStream();
 * stream.end('hello');
 * for await (const chunk of stream) console.log(chunk);
 */
export class MuxStream extends Duplex {
  /** @internal Set by the session while the stream waits in its send rotation. */
  inSendRotation = false;
  /** @internal Set by the session while a WNDINC for this stream waits to be written. */
  creditQueued = false;
  /** @internal ACK probes written on this stream since it last sent data (frame-writer.ts). */
  probesSinceData = 0;
  /**
   * No ACK probes for this stream: set on heartbeat streams, whose 4-byte beats gain nothing
   * from a quicker ACK, and where a probe answering the peer's credit for each echo (ngrok's
   * agents credit every read) doubled the writes of an idle session (issue 35).
   */
  withoutAckProbes = false;

  private sendWindow: number;
  private readonly queue: Buffer[] = [];
  private headOffset = 0;
  private queuedBytes = 0;
  /** Size of the batch _write/_writev handed us, to tell whether it is the stream's last. */
  private batchBytes = 0;
  private writeCallback: ((err?: Error | null) => void) | null = null;
  private finalCallback: ((err?: Error | null) => void) | null = null;
  private synPending: boolean;
  private fin = Fin.None;
  /** The peer will read no more (RST StreamClosed or None): writes are dropped. */
  private discardWrites = false;

  private received = 0;
  private credited = 0;
  private remoteFin = false;
  private forgotten = false;
  private resetCode: number = ErrorCode.StreamCancelled;
  private readonly creditThreshold: number;

  constructor(
    readonly id: number,
    private readonly host: StreamHost,
    /** Receive window, also assumed to be the peer's (muxado has no negotiation). */
    readonly window: number,
    private readonly maxFrameSize: number,
    locallyOpened: boolean,
  ) {
    super({
      allowHalfOpen: true,
      readableHighWaterMark: window,
      writableHighWaterMark: Math.min(window, 64 * 1024),
    });
    this.sendWindow = window;
    this.synPending = locallyOpened;
    this.creditThreshold = Math.max(1, Math.floor(window / 4));
    // Node's Readable schedules `maybeReadMore` (a nextTick, then read(0)) after every push, to
    // call _read until the buffer is full. Ours is a no-op (frames push as they arrive) and
    // onData credits what was consumed, so that tick per DATA frame is pure cost: marking it as
    // already scheduled turns it off. The consumer's own read(), resume() or pipe() reads as
    // always. (issue 29: one tick object and a read(0) per frame, on every keep-alive request.)
    (this as unknown as { _readableState: { readingMore: boolean } })._readableState.readingMore =
      true;
  }

  /**
   * Where memory lent for this stream's writes goes back (MuxSessionOptions.sendLender), if the
   * session has such a lender: a source reading into its slabs (readIntoSlabs) may write views of
   * them to the stream, each given back once written.
   */
  get sendLender(): SlabLender | undefined {
    return this.host.sendLender;
  }

  /** Bytes received and not yet credited back to the peer: never more than `window`. */
  get receiveBuffered(): number {
    return this.received - this.credited;
  }

  /** Bytes the peer may still send before our window is full. */
  get receiveCapacity(): number {
    return this.window - (this.received - this.credited);
  }

  /** Bytes we may still send before the peer must credit more. */
  get sendCapacity(): number {
    return this.sendWindow;
  }

  /**
   * Send RST with `code` and destroy the stream (no 'error' locally).
   * @example stream.reset(ErrorCode.StreamRefused)
   */
  reset(code: number = ErrorCode.StreamCancelled): void {
    this.resetCode = code;
    this.destroy();
  }

  override setEncoding(_encoding: BufferEncoding): this {
    // Flow control counts buffered bytes through readableLength, which counts characters once
    // an encoding is set; decode after reading instead.
    throw new Error('MuxStream carries bytes; decode after reading');
  }

  // Every way of consuming data (flowing mode, read(), async iteration) goes through read(), so
  // this is where consumption is observed and credited back to the peer.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- keeps Readable.read's contract
  override read(size?: number): any {
    // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment
    const chunk = super.read(size);
    this.creditConsumed();
    return chunk;
  }

  override _read(): void {
    // Data is pushed as frames arrive; the window bounds how much can be waiting.
  }

  override _write(
    chunk: Buffer,
    _encoding: BufferEncoding,
    cb: (err?: Error | null) => void,
  ): void {
    this.enqueue([chunk], cb);
  }

  override _writev(
    chunks: { chunk: Buffer; encoding: BufferEncoding }[],
    cb: (err?: Error | null) => void,
  ): void {
    this.enqueue(
      chunks.map((c) => c.chunk),
      cb,
    );
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.discardWrites || this.forgotten || this.fin === Fin.Sent) {
      cb();
      return;
    }
    this.fin = Fin.Pending;
    this.finalCallback = cb;
    this.host.scheduleSend(this);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    const cleanlyClosed = this.fin === Fin.Sent && this.remoteFin;
    if (!this.forgotten) {
      // A stream the peer never heard of (no SYN sent yet) needs no RST.
      if (!cleanlyClosed && !this.synPending && !this.discardWrites) {
        this.host.sendReset(this.id, this.resetCode);
      }
      this.forget();
    }
    this.queue.length = 0;
    this.queuedBytes = 0;
    const pending = [this.writeCallback, this.finalCallback];
    this.writeCallback = this.finalCallback = null;
    cb(err);
    for (const callback of pending) {
      // Built only when needed: an Error's stack trace is costly on this hot path.
      if (callback) callback(err ?? new MuxError(ErrorCode.StreamClosed, 'stream destroyed'));
    }
  }

  private enqueue(chunks: Buffer[], cb: (err?: Error | null) => void): void {
    if (this.discardWrites) {
      cb();
      return;
    }
    if (this.forgotten) {
      cb(new MuxError(ErrorCode.StreamClosed, 'stream is closed'));
      return;
    }
    this.batchBytes = 0;
    for (const chunk of chunks) {
      this.batchBytes += chunk.length;
      if (chunk.length === 0) continue;
      this.queue.push(chunk);
      this.queuedBytes += chunk.length;
    }
    if (this.queuedBytes === 0) {
      cb();
      return;
    }
    this.writeCallback = cb;
    this.host.scheduleSend(this);
  }

  private creditConsumed(): void {
    if (this.creditQueued || this.remoteFin || this.forgotten) return;
    if (this.received - this.readableLength - this.credited >= this.creditThreshold) {
      this.host.sendWindowUpdate(this);
    }
  }

  /**
   * @internal The WNDINC increment to send now: everything consumed and not yet credited (it
   * only grows between the request and the write). 0 once the peer has finished or the stream is
   * gone, when credit is of no use.
   */
  takeCredit(): number {
    if (this.remoteFin || this.forgotten) return 0;
    const owed = this.received - this.readableLength - this.credited;
    if (owed <= 0) return 0;
    this.credited += owed;
    return owed;
  }

  private forget(): void {
    if (this.forgotten) return;
    this.forgotten = true;
    this.host.forgetStream(this);
  }

  private maybeForget(): void {
    if (this.remoteFin && (this.fin === Fin.Sent || this.discardWrites)) this.forget();
  }

  // ---- called by the session -------------------------------------------------------------

  /** @internal Whether a frame can be sent now. */
  hasSendWork(): boolean {
    if (this.queuedBytes > 0) return this.sendWindow > 0;
    return this.fin === Fin.Pending;
  }

  /**
   * @internal Whether an empty DATA frame may go out on this stream now: opened on the wire, not
   * finished or reset by us. Every muxado peer (Go, Rust, ours) reads one as nothing.
   */
  get acceptsEmptyData(): boolean {
    return !this.synPending && this.fin === Fin.None && !this.discardWrites && !this.forgotten;
  }

  /** @internal Write the next DATA frame (header + payload slices) to `out`. */
  writeFrame(out: Writable): void {
    const n = Math.min(this.queuedBytes, this.sendWindow, this.maxFrameSize);
    let flags = 0;
    if (this.synPending) {
      flags |= FrameFlag.Syn;
      this.synPending = false;
    }
    // FIN rides on the last data frame when end() has been called and nothing is buffered
    // behind this batch, saving an empty frame per stream (end(data) is the common case).
    const finNow =
      n === this.queuedBytes &&
      (this.fin === Fin.Pending ||
        (this.fin === Fin.None && this.writableEnded && this.writableLength === this.batchBytes));
    if (finNow) flags |= FrameFlag.Fin;
    const lender = this.host.sendLender;
    if (n > 0 && n < COALESCE_BELOW) {
      const frame = Buffer.allocUnsafe(FRAME_HEADER_SIZE + n);
      encodeFrameHeader(FrameType.Data, flags, this.id, n, frame);
      this.takePayload(n, (piece, at) => {
        piece.copy(frame, FRAME_HEADER_SIZE + at);
        lender?.giveBackRead(piece);
      });
      out.write(frame);
    } else {
      out.write(encodeFrameHeader(FrameType.Data, flags, this.id, n));
      this.takePayload(n, (piece) => {
        // A lent piece goes back when the transport is done with it (a TLS socket has encrypted
        // it by then): only then may a later read of its source go into that memory.
        if (lender?.lends(piece)) out.write(piece, () => lender.giveBackRead(piece));
        else out.write(piece);
      });
    }
    this.sendWindow -= n;
    if (n > 0) this.probesSinceData = 0;
    // Mark FIN sent first: the write callback may call _final synchronously.
    if (finNow) this.fin = Fin.Sent;
    if (this.queuedBytes === 0 && this.writeCallback) {
      const cb = this.writeCallback;
      this.writeCallback = null;
      cb();
    }
    if (finNow) {
      const cb = this.finalCallback;
      this.finalCallback = null;
      this.maybeForget();
      cb?.();
    }
  }

  private takePayload(n: number, emit: (piece: Buffer, at: number) => void): void {
    let taken = 0;
    while (taken < n) {
      const head = this.queue[0]!;
      const available = head.length - this.headOffset;
      const want = n - taken;
      if (available <= want) {
        emit(this.headOffset === 0 ? head : head.subarray(this.headOffset), taken);
        taken += available;
        this.queue.shift();
        this.headOffset = 0;
      } else {
        emit(head.subarray(this.headOffset, this.headOffset + want), taken);
        this.headOffset += want;
        taken = n;
      }
    }
    this.queuedBytes -= n;
  }

  /**
   * The reader is done with `chunk`, a chunk this stream emitted, and nothing refers to its
   * bytes any more (written to a socket that holds none of them, not kept, not sliced into
   * anything kept): its memory may be read into again. Only for readers that know it, and only
   * in the turn that brought the chunk (before the session parses its next reads): a chunk
   * released later, or never, is simply freed by the garbage collector with its slab.
   * @example socket.write(chunk); if (socket.writableLength === 0) stream.release(chunk);
   */
  release(chunk: Buffer): void {
    this.host.giveBack(chunk);
  }

  /** @internal */
  onData(chunk: Buffer): void {
    this.received += chunk.length;
    if (this.destroyed) {
      this.host.giveBack(chunk);
      return;
    }
    // A small view of a large read buffer (a slab, slab-reads.ts) that is going to wait in our
    // buffer is copied out: kept as it is, it would keep the whole slab alive for a few bytes.
    if (
      chunk.length < PIN_COPY_BELOW &&
      chunk.buffer.byteLength >= PIN_BACKING_FROM &&
      (this.readableLength > 0 || this.readableFlowing !== true)
    ) {
      const view = chunk;
      chunk = Buffer.from(view);
      this.host.giveBack(view);
    }
    this.push(chunk);
    this.creditConsumed();
  }

  /** @internal */
  onRemoteFin(): void {
    if (this.remoteFin) return;
    this.remoteFin = true;
    if (!this.destroyed) this.push(null);
    this.maybeForget();
  }

  /** @internal Whether the peer has sent FIN (more DATA would be a violation). */
  get remoteFinished(): boolean {
    return this.remoteFin;
  }

  /** @internal */
  onWindowUpdate(increment: number): boolean {
    this.sendWindow += increment;
    if (this.sendWindow > 0x7fffffff) return false;
    if (this.hasSendWork()) this.host.scheduleSend(this);
    return true;
  }

  /** @internal The peer reset the stream. */
  onRemoteReset(code: number): void {
    this.forget();
    if (code === ErrorCode.StreamClosed || code === ErrorCode.None) {
      // The peer closed its side and reads no more (Go answers late data this way): a normal
      // close. Unsent data is dropped; buffered data can still be read to the end.
      this.discardWrites = true;
      this.queue.length = 0;
      this.queuedBytes = 0;
      const pending = [this.writeCallback, this.finalCallback];
      this.writeCallback = this.finalCallback = null;
      for (const cb of pending) cb?.();
      if (!this.remoteFin) {
        this.remoteFin = true;
        if (!this.destroyed) this.push(null);
      }
      return;
    }
    // As in onSessionClosed: an owner not listening yet must not crash the process. The error (and
    // its stack trace) is built only for an owner who will hear it.
    this.destroy(
      this.listenerCount('error') > 0
        ? new MuxError(code, `stream ${this.id} reset by peer`, true)
        : undefined,
    );
  }

  /** @internal The session ended under the stream: destroyed, with `err` if it failed. */
  onSessionClosed(err: Error | undefined): void {
    this.forgotten = true;
    if (this.destroyed || (this.fin === Fin.Sent && this.remoteFin)) return;
    // A stream nobody listens to for 'error' (its owner got it and has not read from it yet)
    // must not throw the session's failure at the process: the session's 'close' and wait()
    // carry the reason. Found by fuzzing (protocol.fuzz.test.ts).
    this.destroy(this.listenerCount('error') > 0 ? err : undefined);
  }
}
