/**
 * muxado framing (docs/protocol.md §2): an 8-byte big-endian header (uint24 length, type<<4 |
 * flags, uint32 stream id) and a body. This module encodes frames and parses a byte stream into
 * frames incrementally. DATA bodies are handed on as slices of the chunks they arrived in, so bulk
 * data is never copied or concatenated by the parser.
 */
import { BurrowError, muxCode } from '../../core/errors.js';

/** Size of every frame header, in bytes. */
export const FRAME_HEADER_SIZE = 8;
/** Largest body a frame can carry (uint24). */
export const MAX_FRAME_LENGTH = 0xffffff;
/** Stream ids and window increments are 31-bit; the top bit is reserved. */
export const STREAM_ID_MASK = 0x7fffffff;

/** Frame types (high nibble of byte 3). */
export const FrameType = { Rst: 0x0, Data: 0x1, WndInc: 0x2, GoAway: 0x3 } as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** DATA flags (low nibble of byte 3). */
export const FrameFlag = { Fin: 0x1, Syn: 0x2 } as const;

/** Error codes carried by RST and GOAWAY. */
export const ErrorCode = {
  None: 0,
  Protocol: 1,
  Internal: 2,
  FlowControl: 3,
  StreamClosed: 4,
  StreamRefused: 5,
  StreamCancelled: 6,
  StreamReset: 7,
  FrameSize: 8,
  AcceptQueueFull: 9,
  EnhanceYourCalm: 10,
  RemoteGoneAway: 11,
  StreamsExhausted: 12,
  WriteTimeout: 13,
  SessionClosed: 14,
  PeerEOF: 15,
  Unknown: 0xff,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const ERROR_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([k, v]) => [v, k]));

/**
 * The name of an error code, for messages and logs.
 * @example errorCodeName(3) // 'FlowControl'
 */
export function errorCodeName(code: number): string {
  return ERROR_NAMES.get(code) ?? `Unknown(${code})`;
}

/** A whole decoded frame (used by tests and tools; the session consumes the streaming sink). */
export type Frame =
  | { type: 'data'; streamId: number; flags: number; payload: Buffer }
  | { type: 'rst'; streamId: number; code: number }
  | { type: 'wndinc'; streamId: number; increment: number }
  | { type: 'goaway'; lastStreamId: number; code: number; message: string };

/**
 * A muxado protocol violation: the session answers it with GOAWAY carrying `code` and closes.
 * @example throw new FrameError(ErrorCode.Protocol, 'DATA frame on stream 0');
 */
export class FrameError extends BurrowError {
  constructor(
    /** The muxado error number a GOAWAY for this frame carries. */
    readonly wireCode: number,
    message: string,
  ) {
    super(muxCode(wireCode), 502, message);
  }
}

/**
 * Write a frame header into `target` at `offset` (a fresh 8-byte buffer when omitted).
 * @example encodeFrameHeader(FrameType.Data, FrameFlag.Syn, 2, 4) // <00 00 04 12 00 00 00 02>
 */
export function encodeFrameHeader(
  type: number,
  flags: number,
  streamId: number,
  length: number,
  target: Buffer = Buffer.allocUnsafe(FRAME_HEADER_SIZE),
  offset = 0,
): Buffer {
  target[offset] = (length >>> 16) & 0xff;
  target[offset + 1] = (length >>> 8) & 0xff;
  target[offset + 2] = length & 0xff;
  target[offset + 3] = ((type & 0xf) << 4) | (flags & 0xf);
  target.writeUInt32BE(streamId & STREAM_ID_MASK, offset + 4);
  return target;
}

/**
 * A DATA frame as one buffer (header + a copy of the payload). The session writes header and
 * payload separately instead; this is for small frames and tests.
 * @example encodeData(2, Buffer.from('ping'), FrameFlag.Syn)
 */
export function encodeData(streamId: number, payload: Buffer, flags = 0): Buffer {
  if (payload.length > MAX_FRAME_LENGTH) throw new RangeError('DATA payload exceeds 16 MiB');
  const out = Buffer.allocUnsafe(FRAME_HEADER_SIZE + payload.length);
  encodeFrameHeader(FrameType.Data, flags, streamId, payload.length, out);
  payload.copy(out, FRAME_HEADER_SIZE);
  return out;
}

/** @example encodeRst(5, ErrorCode.StreamCancelled) */
export function encodeRst(streamId: number, code: number): Buffer {
  const out = encodeFrameHeader(FrameType.Rst, 0, streamId, 4, Buffer.allocUnsafe(12));
  out.writeUInt32BE(code >>> 0, 8);
  return out;
}

/** @example encodeWndInc(5, 1024) // <00 00 04 20 00 00 00 05 00 00 04 00> */
export function encodeWndInc(streamId: number, increment: number): Buffer {
  if (increment <= 0 || increment > STREAM_ID_MASK) throw new RangeError('bad window increment');
  const out = encodeFrameHeader(FrameType.WndInc, 0, streamId, 4, Buffer.allocUnsafe(12));
  out.writeUInt32BE(increment, 8);
  return out;
}

/** @example encodeGoAway(7, ErrorCode.None, 'bye') */
export function encodeGoAway(lastStreamId: number, code: number, message = ''): Buffer {
  const text = Buffer.from(message, 'utf8').subarray(0, MAX_FRAME_LENGTH - 8);
  const out = Buffer.allocUnsafe(FRAME_HEADER_SIZE + 8 + text.length);
  encodeFrameHeader(FrameType.GoAway, 0, 0, 8 + text.length, out);
  out.writeUInt32BE(lastStreamId & STREAM_ID_MASK, 8);
  out.writeUInt32BE(code >>> 0, 12);
  text.copy(out, 16);
  return out;
}

/** @example encodeFrame({ type: 'rst', streamId: 3, code: ErrorCode.StreamClosed }) */
export function encodeFrame(frame: Frame): Buffer {
  switch (frame.type) {
    case 'data':
      return encodeData(frame.streamId, frame.payload, frame.flags);
    case 'rst':
      return encodeRst(frame.streamId, frame.code);
    case 'wndinc':
      return encodeWndInc(frame.streamId, frame.increment);
    case 'goaway':
      return encodeGoAway(frame.lastStreamId, frame.code, frame.message);
  }
}

/**
 * Receives parsed frames. DATA arrives as start / zero or more body slices / end, so a large
 * frame is delivered as it streams in; the slices share memory with the transport's chunks.
 */
export interface FrameSink {
  dataStart(streamId: number, flags: number, length: number): void;
  dataChunk(streamId: number, chunk: Buffer): void;
  dataEnd(streamId: number, flags: number): void;
  rst(streamId: number, code: number): void;
  wndInc(streamId: number, increment: number): void;
  goAway(lastStreamId: number, code: number, message: string): void;
}

/** GOAWAY debug text kept; the rest of a longer message is skipped. */
const MAX_GOAWAY_MESSAGE = 64 * 1024;

const enum State {
  Header,
  DataBody,
  ControlBody,
  Stopped,
}

/**
 * Incremental frame parser: feed it transport chunks with `push`; it calls the sink as frames
 * complete and throws FrameError on a protocol violation (after which it accepts no more input).
 *
 * @example
 * const parser = new FrameParser(sink);
 * socket.on('data', (chunk) => parser.push(chunk));
 */
export class FrameParser {
  private state = State.Header;
  private readonly header = Buffer.allocUnsafe(FRAME_HEADER_SIZE);
  private headerFill = 0;
  private type = 0;
  private flags = 0;
  private streamId = 0;
  private remaining = 0;
  private control: Buffer = Buffer.alloc(0);
  /** The body of RST and WNDINC (4 bytes), reused: it is read before the next frame starts. */
  private readonly controlWord = Buffer.allocUnsafe(4);
  private controlFill = 0;
  private controlSkip = 0;

  constructor(private readonly sink: FrameSink) {}

  /** Stop parsing: later input is ignored (after an error, or after a GOAWAY). */
  stop(): void {
    this.state = State.Stopped;
  }

  get stopped(): boolean {
    return this.state === State.Stopped;
  }

  push(chunk: Buffer): void {
    let pos = 0;
    const end = chunk.length;
    try {
      while (pos < end && this.state !== State.Stopped) {
        if (this.state === State.Header) {
          if (this.headerFill === 0 && end - pos >= FRAME_HEADER_SIZE) {
            this.startFrame(chunk, pos);
            pos += FRAME_HEADER_SIZE;
          } else {
            const n = Math.min(FRAME_HEADER_SIZE - this.headerFill, end - pos);
            chunk.copy(this.header, this.headerFill, pos, pos + n);
            this.headerFill += n;
            pos += n;
            if (this.headerFill < FRAME_HEADER_SIZE) return;
            this.headerFill = 0;
            this.startFrame(this.header, 0);
          }
        } else if (this.state === State.DataBody) {
          const n = Math.min(this.remaining, end - pos);
          const piece = pos === 0 && n === end ? chunk : chunk.subarray(pos, pos + n);
          pos += n;
          this.remaining -= n;
          this.sink.dataChunk(this.streamId, piece);
          if (this.remaining === 0) this.finishData();
        } else {
          pos = this.readControl(chunk, pos);
        }
      }
    } catch (err) {
      this.state = State.Stopped;
      throw err;
    }
  }

  private startFrame(buf: Buffer, at: number): void {
    const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
    const typeAndFlags = buf[at + 3]!;
    this.type = typeAndFlags >>> 4;
    this.flags = typeAndFlags & 0xf;
    this.streamId = buf.readUInt32BE(at + 4) & STREAM_ID_MASK;
    this.remaining = length;
    switch (this.type) {
      case FrameType.Data:
        if (this.streamId === 0) throw new FrameError(ErrorCode.Protocol, 'DATA frame on stream 0');
        this.sink.dataStart(this.streamId, this.flags, length);
        if (this.state === State.Stopped) return;
        if (length === 0) this.finishData();
        else this.state = State.DataBody;
        return;
      case FrameType.Rst:
      case FrameType.WndInc: {
        const name = this.type === FrameType.Rst ? 'RST' : 'WNDINC';
        if (length !== 4)
          throw new FrameError(ErrorCode.FrameSize, `${name} length ${length} != 4`);
        if (this.streamId === 0) throw new FrameError(ErrorCode.Protocol, `${name} on stream 0`);
        this.beginControl(this.controlWord, 0);
        return;
      }
      case FrameType.GoAway:
        if (this.streamId !== 0) {
          throw new FrameError(ErrorCode.Protocol, 'GOAWAY on a stream other than 0');
        }
        // The Rust encoder writes Length = len(message) without the 8 fixed bytes. A GOAWAY is
        // the last frame anyway, so always read the 8 fixed bytes and whatever message fits.
        this.remaining = Math.max(length, 8);
        this.beginControl(
          Buffer.allocUnsafe(Math.min(this.remaining, 8 + MAX_GOAWAY_MESSAGE)),
          Math.max(0, this.remaining - 8 - MAX_GOAWAY_MESSAGE),
        );
        return;
      default:
        throw new FrameError(ErrorCode.Protocol, `unknown frame type ${this.type}`);
    }
  }

  private finishData(): void {
    this.state = State.Header;
    this.sink.dataEnd(this.streamId, this.flags);
  }

  /** Read the next body bytes into `into`, then drop `skip` more. */
  private beginControl(into: Buffer, skip: number): void {
    this.control = into;
    this.controlFill = 0;
    this.controlSkip = skip;
    this.state = State.ControlBody;
  }

  private readControl(chunk: Buffer, pos: number): number {
    const want = this.control.length - this.controlFill;
    if (want > 0) {
      const n = Math.min(want, chunk.length - pos);
      chunk.copy(this.control, this.controlFill, pos, pos + n);
      this.controlFill += n;
      pos += n;
      if (this.controlFill < this.control.length) return pos;
    }
    if (this.controlSkip > 0) {
      const n = Math.min(this.controlSkip, chunk.length - pos);
      this.controlSkip -= n;
      pos += n;
      if (this.controlSkip > 0) return pos;
    }
    this.state = State.Header;
    const body = this.control;
    if (this.type === FrameType.Rst) {
      this.sink.rst(this.streamId, body.readUInt32BE(0));
    } else if (this.type === FrameType.WndInc) {
      const increment = body.readUInt32BE(0) & STREAM_ID_MASK;
      if (increment === 0) throw new FrameError(ErrorCode.Protocol, 'WNDINC of 0');
      this.sink.wndInc(this.streamId, increment);
    } else {
      this.state = State.Stopped; // nothing after a GOAWAY is parsed
      this.sink.goAway(
        body.readUInt32BE(0) & STREAM_ID_MASK,
        body.readUInt32BE(4),
        body.subarray(8).toString('utf8'),
      );
    }
    return pos;
  }
}

/**
 * Decode a buffer holding whole frames (DATA payloads gathered per frame), or buffers that hold
 * them together, pushed to one parser in turn (a frame may straddle two).
 * @example decodeFrames(encodeWndInc(5, 1024)) // [{ type: 'wndinc', streamId: 5, increment: 1024 }]
 */
export function decodeFrames(buf: Buffer | readonly Buffer[]): Frame[] {
  const frames: Frame[] = [];
  let parts: Buffer[] = [];
  const parser = new FrameParser({
    dataStart: () => {
      parts = [];
    },
    dataChunk: (_id, chunk) => parts.push(chunk),
    dataEnd: (streamId, flags) =>
      frames.push({ type: 'data', streamId, flags, payload: Buffer.concat(parts) }),
    rst: (streamId, code) => frames.push({ type: 'rst', streamId, code }),
    wndInc: (streamId, increment) => frames.push({ type: 'wndinc', streamId, increment }),
    goAway: (lastStreamId, code, message) =>
      frames.push({ type: 'goaway', lastStreamId, code, message }),
  });
  for (const chunk of Buffer.isBuffer(buf) ? [buf] : buf) parser.push(chunk);
  return frames;
}
