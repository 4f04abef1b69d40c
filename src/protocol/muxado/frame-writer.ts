/**
 * The write side of a muxado session: control frames (window updates, resets) go first, then one
 * DATA frame per ready stream per turn, round-robin, so a bulk stream cannot starve the others.
 * Everything one turn produces goes out corked, as one writev. Window updates are coalesced: a
 * stream that owes credit is queued once and its increment is read when the turn's frames are
 * written, so it sends at most one WNDINC per turn with all it has consumed by then, and the
 * turn's control frames are encoded into one buffer. Writing stops while the transport holds more
 * than `writeBufferSize`; when the peer also stops reading our control frames, the session stops
 * reading from it until the transport drains.
 *
 * An ACK probe (`queueAckProbe`) is a frame written only when nothing else has been written since
 * the read that asked for it, checked once the event loop has served every socket that was ready
 * (`setImmediate`): the credit the stream owes, or an empty DATA frame. Its only purpose is the
 * TCP segment that carries it, which acknowledges what the peer sent at once: a peer whose socket
 * runs Nagle's algorithm (ngrok-rust agents) holds its next small write until then, and the
 * kernel's delayed ACK would make it wait about 40 ms (docs/benchmarks.md, "The 40 ms stall").
 * Any write after the read carries that acknowledgement too, so under load, where the requests of
 * other public connections go out in the same loop iteration, most probes are not needed: checked
 * at the end of the read's own turn instead (as first written), the edge sent an @ngrok/ngrok
 * agent 0.21-0.23 TCP segments per keep-alive request with 50 connections, 0.14-0.18 so.
 */
import type { Duplex, Writable } from 'node:stream';
import { FRAME_HEADER_SIZE, FrameType, encodeFrameHeader, encodeWndInc } from './frame.js';

/** Control frames queued behind a stalled transport before we stop reading from it. */
const MAX_CONTROL_BACKLOG = 4096;

/** What the writer needs of a stream it schedules (MuxStream). */
export interface ScheduledStream {
  /** Set while the stream waits in the rotation, so it is queued once. */
  inSendRotation: boolean;
  readonly destroyed: boolean;
  hasSendWork(): boolean;
  writeFrame(out: Writable): void;
}

/** A stream that owes its peer window credit (MuxStream). */
export interface CreditedStream {
  readonly id: number;
  /** Set while the stream waits in the control queue, so it is queued once per turn. */
  creditQueued: boolean;
  /** The increment to send now (bytes consumed and not yet credited), 0 for none; marks it sent. */
  takeCredit(): number;
}

/** A stream an ACK probe may be written on (MuxStream). */
export interface ProbedStream extends CreditedStream {
  /** Whether an empty DATA frame may go out on it now. */
  readonly acceptsEmptyData: boolean;
  /** Probes written on it since it last sent data; counted here, reset when it sends. */
  probesSinceData: number;
}

/** WNDINC: header and a 4-byte increment. */
const WNDINC_SIZE = FRAME_HEADER_SIZE + 4;

function isEncoded(entry: Buffer | CreditedStream): entry is Buffer {
  return entry instanceof Uint8Array;
}

/**
 * @example
 * const writer = new FrameWriter(socket, 512 * 1024);
 * writer.queueControl(encodeRst(3, ErrorCode.StreamCancelled));
 * writer.queueCredit(stream); // a WNDINC for what it has consumed, on the next turn
 * writer.schedule(stream); // its frames go out on the next turn
 */
export class FrameWriter {
  /** Encoded control frames and streams owing credit, in the order they were queued. */
  // Emptied by replacing, not by `length = 0`: V8 sets an array's length through a runtime call,
  // on every turn that wrote.
  private control: (Buffer | CreditedStream)[] = [];
  private rotation: ScheduledStream[] = [];
  private rotationHead = 0;
  private probe: ProbedStream | undefined;
  /** `writes` when the probe was asked for: any write since acknowledges the peer's data. */
  private probeMark = 0;
  private probeScheduled = false;
  /** Turns (and probes) that wrote something, ever: compared with `probeMark`. */
  private writes = 0;
  /** ACK probes written, ever (for tests and benchmarks). */
  probesWritten = 0;
  private pumpScheduled = false;
  private pumping = false;
  private waitingForDrain = false;
  private readPaused = false;
  private stopped = false;

  constructor(
    private readonly transport: Duplex,
    private readonly writeBufferSize: number,
  ) {}

  /** Give `stream` a turn: it has a frame to send. */
  schedule(stream: ScheduledStream): void {
    if (this.stopped || stream.inSendRotation) return;
    stream.inSendRotation = true;
    this.rotation.push(stream);
    this.schedulePump();
  }

  /** Send `frame` ahead of any DATA frame. */
  queueControl(frame: Buffer): void {
    if (this.stopped) return;
    this.pushControl(frame);
  }

  /** Send `stream` a WNDINC on the next turn, for whatever it has consumed by then. */
  queueCredit(stream: CreditedStream): void {
    if (this.stopped || stream.creditQueued) return;
    stream.creditQueued = true;
    this.pushControl(stream);
  }

  /**
   * Make sure something is written soon after the read that just happened: if nothing else has
   * been written when the event loop reaches its check phase, write a frame on `stream` (its owed
   * credit, else an empty DATA frame), so the peer's data is acknowledged now rather than by the
   * delayed-ACK timer. A later call replaces the stream and the mark (it asks for a later read).
   */
  queueAckProbe(stream: ProbedStream): void {
    if (this.stopped) return;
    this.probe = stream;
    this.probeMark = this.writes;
    if (this.probeScheduled) return;
    this.probeScheduled = true;
    setImmediate(this.flushProbe);
  }

  private readonly flushProbe = (): void => {
    this.probeScheduled = false;
    const probe = this.probe;
    this.probe = undefined;
    // A write since the read carried the ACK; a transport waiting for 'drain' has segments of
    // ours still to go, which carry it too.
    if (!probe || this.stopped || this.writes !== this.probeMark || this.waitingForDrain) return;
    this.writeProbe(probe, this.transport);
  };

  private pushControl(entry: Buffer | CreditedStream): void {
    this.control.push(entry);
    if (this.waitingForDrain && this.control.length > MAX_CONTROL_BACKLOG && !this.readPaused) {
      // The peer sends but does not read: stop reading until it does.
      this.readPaused = true;
      this.transport.pause();
    }
    this.schedulePump();
  }

  /** The session ended: drop everything queued and write nothing more. */
  stop(): void {
    this.stopped = true;
    this.control = [];
    this.rotation = [];
    this.rotationHead = 0;
    this.probe = undefined;
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.pumping || this.waitingForDrain || this.stopped) return;
    this.pumpScheduled = true;
    process.nextTick(this.pump);
  }

  private readonly pump = (): void => {
    this.pumpScheduled = false;
    if (this.pumping || this.waitingForDrain || this.stopped) return;
    const out = this.transport;
    this.pumping = true;
    let wrote = false;
    out.cork();
    try {
      for (;;) {
        if (this.stopped) break;
        if (out.writableLength >= this.writeBufferSize) {
          this.waitingForDrain = true;
          out.once('drain', this.onDrain);
          break;
        }
        if (this.control.length > 0) {
          const frames = this.takeControl();
          if (frames.length > 0) {
            out.write(frames);
            wrote = true;
          }
          continue;
        }
        const stream = this.nextInRotation();
        if (!stream) break;
        if (stream.destroyed || !stream.hasSendWork()) continue;
        stream.writeFrame(out);
        wrote = true;
        if (!stream.inSendRotation && stream.hasSendWork()) {
          stream.inSendRotation = true;
          this.rotation.push(stream);
        }
      }
      if (wrote) this.writes++;
    } finally {
      this.pumping = false;
      out.uncork();
    }
  };

  private writeProbe(stream: ProbedStream, out: Writable): void {
    const credit = stream.creditQueued ? 0 : stream.takeCredit();
    if (credit > 0) {
      out.write(encodeWndInc(stream.id, credit));
    } else if (stream.acceptsEmptyData) {
      out.write(encodeFrameHeader(FrameType.Data, 0, stream.id, 0));
    } else {
      return;
    }
    stream.probesSinceData++;
    this.probesWritten++;
    this.writes++;
  }

  /** The queued control frames as one buffer (WNDINCs encoded now, with their current credit). */
  private takeControl(): Buffer {
    const entries = this.control;
    const only = entries.length === 1 ? entries[0]! : undefined;
    if (only && isEncoded(only)) {
      this.control = [];
      return only;
    }
    let size = 0;
    for (const entry of entries) size += isEncoded(entry) ? entry.length : WNDINC_SIZE;
    const out = Buffer.allocUnsafe(size);
    let at = 0;
    for (const entry of entries) {
      if (isEncoded(entry)) {
        at += entry.copy(out, at);
        continue;
      }
      entry.creditQueued = false;
      const increment = entry.takeCredit();
      if (increment <= 0) continue;
      encodeFrameHeader(FrameType.WndInc, 0, entry.id, 4, out, at);
      out.writeUInt32BE(increment, at + FRAME_HEADER_SIZE);
      at += WNDINC_SIZE;
    }
    this.control = [];
    return at === size ? out : out.subarray(0, at);
  }

  private nextInRotation(): ScheduledStream | undefined {
    if (this.rotationHead >= this.rotation.length) {
      this.rotation = [];
      this.rotationHead = 0;
      return undefined;
    }
    const stream = this.rotation[this.rotationHead++]!;
    // Compact now and then so a long-lived session does not keep a growing array of served turns.
    if (this.rotationHead > 1024 && this.rotationHead * 2 > this.rotation.length) {
      this.rotation = this.rotation.slice(this.rotationHead);
      this.rotationHead = 0;
    }
    stream.inSendRotation = false;
    return stream;
  }

  private readonly onDrain = (): void => {
    this.waitingForDrain = false;
    if (this.readPaused) {
      this.readPaused = false;
      this.transport.resume();
    }
    this.pump();
  };
}
