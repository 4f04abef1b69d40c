/**
 * The write side of a muxado session: control frames (window updates, resets) go first, then one
 * DATA frame per ready stream per turn, round-robin, so a bulk stream cannot starve the others.
 * Writing stops while the transport holds more than `writeBufferSize`; when the peer also stops
 * reading our control frames, the session stops reading from it until the transport drains.
 */
import type { Duplex, Writable } from 'node:stream';

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

/**
 * @example
 * const writer = new FrameWriter(socket, 512 * 1024);
 * writer.queueControl(encodeWndInc(3, 65536));
 * writer.schedule(stream); // its frames go out on the next turn
 */
export class FrameWriter {
  private readonly control: Buffer[] = [];
  private rotation: ScheduledStream[] = [];
  private rotationHead = 0;
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
    this.control.push(frame);
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
    this.control.length = 0;
    this.rotation = [];
    this.rotationHead = 0;
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
          out.write(this.control.length === 1 ? this.control[0]! : Buffer.concat(this.control));
          this.control.length = 0;
          continue;
        }
        const stream = this.nextInRotation();
        if (!stream) break;
        if (stream.destroyed || !stream.hasSendWork()) continue;
        stream.writeFrame(out);
        if (!stream.inSendRotation && stream.hasSendWork()) {
          stream.inSendRotation = true;
          this.rotation.push(stream);
        }
      }
    } finally {
      this.pumping = false;
      out.uncork();
    }
  };

  private nextInRotation(): ScheduledStream | undefined {
    if (this.rotationHead >= this.rotation.length) {
      this.rotation.length = 0;
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
