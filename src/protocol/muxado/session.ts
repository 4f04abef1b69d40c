import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { AcceptQueue } from './accept-queue.js';
import { MuxError } from './errors.js';
import { FrameWriter } from './frame-writer.js';
import {
  ErrorCode,
  FrameError,
  FrameFlag,
  FrameParser,
  MAX_FRAME_LENGTH,
  STREAM_ID_MASK,
  encodeGoAway,
  encodeRst,
  type FrameSink,
} from './frame.js';
import type { SlabLender, SlabReadSink } from './slab-reads.js';
import { MuxStream, type StreamHost } from './stream.js';
import { DEFAULT_WINDOW } from './window.js';

// Also importable from here, where they lived first.
export { BURROW_ALPN, BURROW_WINDOW, DEFAULT_WINDOW, windowForAlpn } from './window.js';

/** The client (agent, SDK) opens odd streams from 3; the server (edge) opens even ones from 2. */
export type MuxRole = 'client' | 'server';

export interface MuxSessionOptions {
  role: MuxRole;
  /** Per-stream receive window, also assumed for the peer. Default 256 KiB (DEFAULT_WINDOW). */
  window?: number;
  /** Largest DATA payload per frame we send; smaller frames interleave streams more finely. */
  maxFrameSize?: number;
  /** Accepted streams queued for accept() when nobody listens to 'stream' (Go: 128). */
  acceptBacklog?: number;
  /** Peer-opened streams open at once; more are refused with RST StreamRefused. */
  maxIncomingStreams?: number;
  /** Largest DATA payload accepted from the peer; a larger frame ends the session (FrameSize). */
  maxIncomingFrameSize?: number;
  /** Told when the peer goes over maxIncomingStreams or maxIncomingFrameSize (for metrics). */
  onLimit?: (limit: 'streams' | 'frame_size') => void;
  /** Bytes queued in the transport before the scheduler waits for 'drain'. */
  writeBufferSize?: number;
  /**
   * Answer a small read that carried a WNDINC or DATA at once with a frame of our own (the credit
   * owed, else an empty DATA frame) when nothing else goes out, so its TCP segment acknowledges
   * the peer's data now: for peers whose sockets run Nagle's algorithm (ngrok-rust agents), whose
   * next small write would otherwise wait for our delayed ACK, about 40 ms. Default false.
   */
  ackProbes?: boolean;
  /**
   * Parse what the transport read once the event loop has served every socket that was ready
   * (`setImmediate`), not read by read: the TLS records of a bulk transfer (16 KiB each) come as
   * one 'data' event apiece, and reads that are contiguous in memory (a transport reading into
   * slabs, slab-reads.ts) are joined into one view first, so a stream gets its DATA in pieces as
   * large as its frames and its reader writes them on in fewer, larger writes. Default false.
   */
  coalesceReads?: boolean;
  /**
   * The lender of the transport's reads (readIntoSlabs): each read is given back once parsed,
   * and each DATA chunk is lent to its stream until its reader releases it (MuxStream.release),
   * so that the slabs are read into again instead of allocated afresh.
   */
  lender?: SlabLender;
  /**
   * The lender of what the session's streams are given to write: a source that reads into its
   * slabs (readIntoSlabs with this lender) writes views of them to a stream, and each payload is
   * given back once the transport has written it, so that the source reads into the same slabs
   * again (the SDK's service sockets during a download; docs/benchmarks.md, issue 29).
   */
  sendLender?: SlabLender;
}

/** Reads at least this large are bulk transfer: the peer's segments are full and get ACKed. */
const ACK_PROBE_BELOW = 16 * 1024;
/**
 * Probes on a stream that sends no data of its own, at most: enough for an exchange (the peer's
 * credit for a request, the first frame of its answer), and no more, since an agent that answers
 * each probe with a small frame would otherwise be probed back for ever. That ping-pong held a TCP
 * download from an @ngrok/ngrok agent at 2 MB/s, with 350 s of edge CPU per GB; 246 MB/s without.
 */
const MAX_PROBES_WITHOUT_DATA = 4;
/**
 * DATA chunks of one parse remembered for their readers' release, at most: a chunk past it stays
 * counted as lent for good (its slab is left to the garbage collector instead of read into again).
 */
const MAX_LENT_CHUNKS = 4096;

/** What the peer said in its GOAWAY. */
export interface GoAwayInfo {
  lastStreamId: number;
  code: number;
  message: string;
}

const DEFAULT_MAX_FRAME = 64 * 1024;
const DEFAULT_WRITE_BUFFER = 512 * 1024;
/** How long a closing transport may take to finish before it is destroyed. */
const CLOSE_GRACE_MS = 2000;

/**
 * A muxado session over any byte Duplex (net.Socket, tls.TLSSocket): opens and accepts streams,
 * routes frames, and writes frames with a round-robin scheduler (one frame per ready stream per
 * turn, control frames first) that stops while the transport is over `writeBufferSize`.
 *
 * Protocol violations close the session with GOAWAY (Protocol, FrameSize or FlowControl); the
 * error is reported through 'close' and wait(), never thrown at the process.
 *
 * Events: 'stream' (MuxStream opened by the peer; without a listener streams queue for
 * accept()), 'goaway' (GoAwayInfo from the peer), 'close' (Error | undefined).
 *
 * When the session fails (protocol error, transport error, GOAWAY with an error code) open
 * streams are destroyed with that error; when it ends cleanly (close(), peer EOF, GOAWAY None)
 * they are destroyed without one, as in node:http2, and finished()/pipeline() report a
 * premature close.
 *
 * @example
 * const session = new MuxSession(socket, { role: 'server' });
 * session.on('stream', (stream) => stream.pipe(stream)); // echo
 */
export class MuxSession extends EventEmitter implements StreamHost {
  readonly role: MuxRole;
  readonly window: number;
  readonly maxFrameSize: number;
  /** Set once the peer has sent GOAWAY. */
  remoteGoAway: GoAwayInfo | undefined;

  private readonly streams = new Map<number, MuxStream>();
  private readonly parser: FrameParser;
  private readonly accepted: AcceptQueue<MuxStream>;
  private readonly maxIncomingStreams: number;
  private readonly maxIncomingFrameSize: number;
  private readonly onLimit: ((limit: 'streams' | 'frame_size') => void) | undefined;
  private nextLocalId: number;
  private lastRemoteId = 0;
  private incomingOpen = 0;
  private receiving: MuxStream | null = null;
  private receivingLength = 0;
  private readonly ackProbes: boolean;
  /** The stream of this read's last WNDINC or DATA frame, for an ACK probe. */
  private probeCandidate: MuxStream | undefined;
  private readonly coalesceReads: boolean;
  /** Reads waiting to be parsed (coalesceReads), contiguous ones joined. */
  private pendingReads: Buffer[] = [];
  /** The reads as the transport gave them, to give back to the lender once parsed. */
  private pendingLent: Buffer[] = [];
  private readsScheduled = false;
  private readonly lender: SlabLender | undefined;
  /** @internal See MuxSessionOptions.sendLender. */
  readonly sendLender: SlabLender | undefined;
  /**
   * The DATA chunks of the last parse that were lent (counted on their slab) and not yet given
   * back: a reader's release is looked up here, by identity. Forgotten when the next reads are
   * parsed, so a chunk released later (or never: a reader that keeps it, or does not release)
   * stays counted and its slab goes to the garbage collector; the relay releases a chunk in the
   * turn that brought it. A WeakMap entry per chunk did the same for any later release, and cost
   * an insert and the ephemeron table's growth and collection on every response (issue 29).
   * Readers release in the order the chunks came (the relay gives back a turn's writes in order,
   * connection-stream.ts), so a release is looked for from the first chunk still out
   * (`lentFirst`) and a chunk given back leaves a hole: a turn of n chunks costs n steps, where
   * moving the last chunk into the hole made the scan n²/2 (an agent's many tiny DATA frames).
   */
  private lentChunks: (Buffer | undefined)[] = [];
  private lentFirst = 0;
  /** The reads handed to `slabSink` since the last parse and not yet in `pendingReads`: a range. */
  private rangeSlab: Buffer | undefined;
  private rangeStart = 0;
  private rangeEnd = 0;

  private readonly writer: FrameWriter;

  private ended = false;
  private readonly closedPromise: Promise<Error | undefined>;
  private resolveClosed!: (reason: Error | undefined) => void;

  constructor(
    private readonly transport: Duplex,
    options: MuxSessionOptions,
  ) {
    super();
    this.role = options.role;
    this.window = options.window ?? DEFAULT_WINDOW;
    this.maxFrameSize = Math.min(options.maxFrameSize ?? DEFAULT_MAX_FRAME, this.window, 0xffffff);
    this.accepted = new AcceptQueue(options.acceptBacklog ?? 128);
    this.maxIncomingStreams = options.maxIncomingStreams ?? 1024;
    this.maxIncomingFrameSize = options.maxIncomingFrameSize ?? MAX_FRAME_LENGTH;
    this.onLimit = options.onLimit;
    this.ackProbes = options.ackProbes ?? false;
    this.coalesceReads = options.coalesceReads ?? false;
    this.lender = options.lender;
    this.sendLender = options.sendLender;
    this.writer = new FrameWriter(
      transport,
      Math.max(options.writeBufferSize ?? DEFAULT_WRITE_BUFFER, transport.writableHighWaterMark),
    );
    if (this.window < 1 || this.window > STREAM_ID_MASK) throw new RangeError('bad window size');
    // The counter is bumped by 2 before use: client ids 3, 5, …; server ids 2, 4, ….
    this.nextLocalId = this.role === 'client' ? 1 : 0;
    this.closedPromise = new Promise((resolve) => (this.resolveClosed = resolve));
    this.parser = new FrameParser(this.sink());
    (transport as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
    transport.on('data', this.coalesceReads ? this.onCoalescedData : this.onTransportData);
    // A transport that just ends is a clean ending (Rust/JS agents disconnect without GOAWAY):
    // open streams close without an error, as in node:http2; errors reach them only when the
    // session fails. What was read before is parsed first.
    transport.on('end', () => {
      this.parsePendingReads();
      this.endSession(new MuxError(ErrorCode.PeerEOF, 'peer closed', true), false);
    });
    transport.on('error', (err: Error) => {
      this.parsePendingReads();
      this.endSession(err, true);
    });
    transport.on('close', () => {
      this.parsePendingReads();
      this.endSession(new MuxError(ErrorCode.SessionClosed, 'transport closed'), false);
    });
  }

  /** True once the session has ended (GOAWAY, close, error or EOF). */
  get closed(): boolean {
    return this.ended;
  }

  /** Streams currently routed by this session. */
  get streamCount(): number {
    return this.streams.size;
  }

  /** ACK probes written on this session so far (`ackProbes`; for tests and benchmarks). */
  get ackProbesWritten(): number {
    return this.writer.probesWritten;
  }

  /** Slabs of the transport's reads read into again instead of allocated (`lender`). */
  get slabsReused(): number {
    return this.lender?.reused ?? 0;
  }

  /** Resolves when the session ends: undefined after a local close(), else the reason. */
  wait(): Promise<Error | undefined> {
    return this.closedPromise;
  }

  /**
   * Open a stream. Nothing is sent until the first write or end(): the SYN rides on that frame.
   * @example const stream = session.openStream(); stream.write(typeBytes);
   */
  openStream(): MuxStream {
    if (this.ended) throw new MuxError(ErrorCode.SessionClosed, 'session is closed');
    const id = this.nextLocalId + 2;
    if (id > STREAM_ID_MASK) {
      this.goAway(ErrorCode.StreamsExhausted, 'stream ids exhausted');
      throw new MuxError(ErrorCode.StreamsExhausted, 'stream ids exhausted');
    }
    this.nextLocalId = id;
    const stream = new MuxStream(id, this, this.window, this.maxFrameSize, true);
    this.streams.set(id, stream);
    return stream;
  }

  /** The next stream opened by the peer (when no 'stream' listener takes them). */
  accept(): Promise<MuxStream> {
    return this.accepted.take();
  }

  /**
   * Send GOAWAY (the last frame) and close the transport; open streams fail with SessionClosed.
   * @example session.goAway(ErrorCode.None, 'server shutting down')
   */
  goAway(code: number = ErrorCode.None, message = ''): void {
    if (this.ended) return;
    if (this.transport.writable) {
      this.transport.write(encodeGoAway(this.lastRemoteId, code, message));
      this.transport.end();
    }
    const failed = code !== ErrorCode.None;
    this.endSession(failed ? new MuxError(code, `session closed: ${message}`) : undefined, failed);
  }

  /** Close politely: GOAWAY with no error, then close the transport. */
  close(): void {
    this.goAway(ErrorCode.None, 'closing');
  }

  /** Tear down the transport at once, without GOAWAY; open streams fail with `err` if given. */
  destroy(err?: Error): void {
    this.transport.destroy();
    this.endSession(err, err !== undefined);
  }

  // ---- StreamHost --------------------------------------------------------------------------

  /** @internal */
  scheduleSend(stream: MuxStream): void {
    this.writer.schedule(stream);
  }

  /** @internal */
  sendWindowUpdate(stream: MuxStream): void {
    this.writer.queueCredit(stream);
  }

  /** @internal */
  sendReset(streamId: number, code: number): void {
    this.writer.queueControl(encodeRst(streamId, code));
  }

  /** @internal */
  giveBack(chunk: Buffer): void {
    const lent = this.lentChunks;
    let first = this.lentFirst;
    const at = lent[first] === chunk ? first : lent.indexOf(chunk, first);
    if (at < 0) return;
    lent[at] = undefined;
    while (first < lent.length && lent[first] === undefined) first++;
    this.lentFirst = first;
    this.lender!.giveBackRead(chunk);
  }

  /** The chunks of the last parse are no longer looked up: later releases are ignored. */
  private forgetLent(): void {
    if (this.lentChunks.length === 0) return;
    this.lentChunks = [];
    this.lentFirst = 0;
  }

  /** @internal */
  forgetStream(stream: MuxStream): void {
    if (this.streams.get(stream.id) !== stream) return;
    this.streams.delete(stream.id);
    if (!this.isLocalId(stream.id)) this.incomingOpen--;
    if (this.receiving === stream) this.receiving = null;
  }

  // ---- reading -----------------------------------------------------------------------------

  /**
   * The transport's reads as ranges of its read slabs (readIntoSlabs' sink) instead of 'data'
   * events: a read that follows the last one in its slab only moves the end of the range, so the
   * TLS records of a turn (one read each) cost no Buffer and no event apiece; what the turn read
   * is parsed as one view of each run of contiguous reads. Reads lent from `lender` are given back
   * as those views once parsed. Without coalesceReads each read is parsed at once.
   */
  readonly slabSink: SlabReadSink = (slab, start, length) => {
    if (!this.coalesceReads) {
      this.onTransportData(slab.subarray(start, start + length));
      return;
    }
    if (this.rangeSlab === slab && this.rangeEnd === start) {
      this.rangeEnd += length;
    } else {
      this.closeRange();
      this.rangeSlab = slab;
      this.rangeStart = start;
      this.rangeEnd = start + length;
    }
    if (this.readsScheduled) return;
    this.readsScheduled = true;
    setImmediate(this.onReadsDue);
  };

  /** The range of reads so far goes to the reads to parse, as one view. */
  private closeRange(): void {
    const slab = this.rangeSlab;
    if (slab === undefined) return;
    this.rangeSlab = undefined;
    const view = slab.subarray(this.rangeStart, this.rangeEnd);
    this.pendingReads.push(view);
    if (this.lender) this.pendingLent.push(view);
  }

  /** coalesceReads: keep the read for the check phase, joined to the last one when contiguous. */
  private readonly onCoalescedData = (chunk: Buffer): void => {
    if (this.lender) this.pendingLent.push(chunk);
    const pending = this.pendingReads;
    const last = pending.length > 0 ? pending[pending.length - 1]! : undefined;
    if (
      last !== undefined &&
      last.buffer === chunk.buffer &&
      last.byteOffset + last.length === chunk.byteOffset
    ) {
      pending[pending.length - 1] = Buffer.from(
        last.buffer,
        last.byteOffset,
        last.length + chunk.length,
      );
    } else {
      pending.push(chunk);
    }
    if (this.readsScheduled) return;
    this.readsScheduled = true;
    setImmediate(this.onReadsDue);
  };

  private readonly onReadsDue = (): void => {
    this.readsScheduled = false;
    this.parsePendingReads();
  };

  private parsePendingReads(): void {
    this.closeRange();
    const pending = this.pendingReads;
    if (pending.length === 0) return;
    const lent = this.pendingLent;
    this.pendingReads = [];
    this.pendingLent = [];
    this.forgetLent();
    for (const chunk of pending) {
      if (this.ended) break;
      this.parse(chunk);
    }
    // Parsed: the reads' bytes are held now only by the DATA chunks lent to streams.
    for (const chunk of lent) this.lender!.giveBackRead(chunk);
  }

  private readonly onTransportData = (chunk: Buffer): void => {
    this.forgetLent();
    this.parse(chunk);
    this.lender?.giveBackRead(chunk);
  };

  private parse(chunk: Buffer): void {
    try {
      this.parser.push(chunk);
      const candidate = this.probeCandidate;
      if (candidate) {
        this.probeCandidate = undefined;
        if (
          chunk.length < ACK_PROBE_BELOW &&
          !this.ended &&
          !candidate.withoutAckProbes &&
          candidate.probesSinceData < MAX_PROBES_WITHOUT_DATA
        ) {
          this.writer.queueAckProbe(candidate);
        }
      }
    } catch (err) {
      if (err instanceof FrameError) {
        this.goAway(err.wireCode, err.message);
        return;
      }
      this.goAway(ErrorCode.Internal, 'internal error');
      throw err; // a bug in a listener: surface it like any other listener exception
    }
  }

  private isLocalId(id: number): boolean {
    return (id & 1) === (this.role === 'client' ? 1 : 0);
  }

  private sink(): FrameSink {
    return {
      dataStart: (id, flags, length) => this.onDataStart(id, flags, length),
      dataChunk: (_id, chunk) => {
        const stream = this.receiving;
        if (!stream) return;
        const lender = this.lender;
        if (lender?.lendRead(chunk) && this.lentChunks.length < MAX_LENT_CHUNKS) {
          this.lentChunks.push(chunk);
        }
        stream.onData(chunk);
      },
      dataEnd: (_id, flags) => {
        const stream = this.receiving;
        this.receiving = null;
        if (!stream) return;
        if (flags & FrameFlag.Fin) stream.onRemoteFin();
        else if (this.ackProbes && this.receivingLength > 0) this.probeCandidate = stream;
      },
      rst: (id, code) => this.streams.get(id)?.onRemoteReset(code),
      wndInc: (id, increment) => {
        const stream = this.streams.get(id);
        if (stream && !stream.onWindowUpdate(increment)) {
          throw new FrameError(ErrorCode.FlowControl, `stream ${id} send window overflow`);
        }
        if (stream && this.ackProbes) this.probeCandidate = stream;
      },
      goAway: (lastStreamId, code, message) => this.onGoAway({ lastStreamId, code, message }),
    };
  }

  private onDataStart(id: number, flags: number, length: number): void {
    this.receiving = null;
    this.receivingLength = length;
    // Judged on the header, before a byte of the payload is taken in.
    if (length > this.maxIncomingFrameSize) {
      this.onLimit?.('frame_size');
      throw new FrameError(
        ErrorCode.FrameSize,
        `DATA frame of ${length} bytes on stream ${id}; the limit is ${this.maxIncomingFrameSize}`,
      );
    }
    let stream = this.streams.get(id);
    if (flags & FrameFlag.Syn) {
      if (this.isLocalId(id)) {
        throw new FrameError(ErrorCode.Protocol, `peer opened stream ${id} with our parity`);
      }
      if (id <= this.lastRemoteId) {
        throw new FrameError(ErrorCode.Protocol, `peer reopened stream ${id}`);
      }
      // Judge the frame before anything is allocated for it: a stream registered here and then
      // failed with the session would emit 'error' to nobody.
      if (length > this.window) {
        throw new FrameError(ErrorCode.FlowControl, `stream ${id} overran its receive window`);
      }
      this.lastRemoteId = id;
      if (this.incomingOpen >= this.maxIncomingStreams) {
        this.onLimit?.('streams');
        this.sendReset(id, ErrorCode.StreamRefused);
        return;
      }
      stream = new MuxStream(id, this, this.window, this.maxFrameSize, false);
      this.streams.set(id, stream);
      this.incomingOpen++;
      this.receiving = stream;
      this.deliver(stream);
      if (stream.destroyed) this.receiving = null;
      return;
    }
    if (!stream) {
      // Late data for a stream we closed; Go replies the same way and ignores a bare FIN.
      if (!(length === 0 && flags & FrameFlag.Fin)) this.sendReset(id, ErrorCode.StreamClosed);
      return;
    }
    if (stream.remoteFinished) {
      stream.reset(ErrorCode.StreamClosed);
      return;
    }
    if (length > stream.receiveCapacity) {
      throw new FrameError(ErrorCode.FlowControl, `stream ${id} overran its receive window`);
    }
    this.receiving = stream;
  }

  private deliver(stream: MuxStream): void {
    if (this.listenerCount('stream') > 0) {
      this.emit('stream', stream);
    } else if (!this.accepted.offer(stream)) {
      stream.reset(ErrorCode.AcceptQueueFull);
    }
  }

  private onGoAway(info: GoAwayInfo): void {
    this.remoteGoAway = info;
    const gone = new MuxError(ErrorCode.RemoteGoneAway, 'peer went away before this stream', true);
    for (const stream of [...this.streams.values()]) {
      if (this.isLocalId(stream.id) && stream.id > info.lastStreamId) {
        this.streams.delete(stream.id);
        stream.onSessionClosed(gone);
      }
    }
    this.emit('goaway', info);
    const failed = info.code !== ErrorCode.None;
    const reason = failed
      ? new MuxError(info.code, `peer sent GOAWAY: ${info.message}`, true)
      : new MuxError(ErrorCode.RemoteGoneAway, `peer went away: ${info.message}`, true);
    if (this.transport.writable) this.transport.end();
    this.endSession(reason, failed);
  }

  // ---- ending ------------------------------------------------------------------------------

  /**
   * @param reason what wait() and 'close' report (undefined: we closed deliberately)
   * @param failStreams whether open streams get `reason` as their error or just close
   */
  private endSession(reason: Error | undefined, failStreams: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.parser.stop();
    this.writer.stop();
    this.pendingReads = [];
    this.pendingLent = [];
    this.forgetLent();
    this.rangeSlab = undefined;
    const streamError = failStreams ? reason : undefined;
    const acceptError = reason ?? new MuxError(ErrorCode.SessionClosed, 'session closed');
    // Streams still queued were never handed to anyone who could listen for their 'error'.
    for (const stream of this.accepted.close(acceptError)) stream.onSessionClosed(undefined);
    const open = [...this.streams.values()];
    this.streams.clear();
    for (const stream of open) stream.onSessionClosed(streamError);
    if (!this.transport.destroyed) {
      const timer = setTimeout(() => this.transport.destroy(), CLOSE_GRACE_MS);
      timer.unref();
      this.transport.once('close', () => clearTimeout(timer));
      if (this.transport.writable) this.transport.end();
    }
    this.resolveClosed(reason);
    this.emit('close', reason);
  }
}
