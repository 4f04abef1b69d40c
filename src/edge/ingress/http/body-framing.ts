/**
 * Where a message body ends, found while its bytes are relayed as they are: a Content-Length
 * counts down; a chunked body is checked byte by byte in its framing (sizes, extensions, the CRLF
 * after each chunk, trailers) and skipped over in its data, so bulk costs one subtraction per
 * read. A framing error stops the relay: the connection closes rather than pass on a message the
 * agent could read differently.
 */
import { isToken, isFieldValue } from './head-syntax.js';

/** Reads how much of a buffer belongs to the current body. */
export interface BodyFramer {
  /**
   * How many bytes of `buf` from `start` belong to the body (the rest is the next message), or
   * a string saying why the bytes are not a valid body.
   */
  take(buf: Buffer, start: number): number | string;
  /** True once the whole body has been taken. */
  readonly done: boolean;
}

/**
 * A body of a known length.
 * @example new LengthFramer(5).take(Buffer.from('helloGET'), 0) // 5
 */
export class LengthFramer implements BodyFramer {
  constructor(private remaining: number) {}

  /** Bytes of the body still to come. */
  get left(): number {
    return this.remaining;
  }

  get done(): boolean {
    return this.remaining === 0;
  }

  take(buf: Buffer, start: number): number {
    const n = Math.min(this.remaining, buf.length - start);
    this.remaining -= n;
    return n;
  }
}

const enum State {
  Size,
  Ext,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  Trailer,
  TrailerLf,
  EndLf,
  Done,
}

/** Longest chunk-size line (size and extensions) and trailer line accepted. */
const MAX_LINE = 4096;
/** Bytes of trailers accepted in all. */
const MAX_TRAILERS = 16 * 1024;
/**
 * chunk-ext (RFC 9112 §7.1.1), with optional whitespace around `;` and `=`; a quoted value may
 * hold no control characters but HTAB.
 */
const CHUNK_EXT =
  // eslint-disable-next-line no-control-regex -- the rule is about control characters
  /^(?:[ \t]*;[ \t]*[!#$%&'*+.^_`|~\w-]+(?:[ \t]*=[ \t]*(?:[!#$%&'*+.^_`|~\w-]+|"(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\t\x20-\x7e\x80-\xff])*"))?)*[ \t]*$/;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** What a decoding {@link ChunkedFramer} hands on: the data without its coding, and trailers. */
export interface ChunkedParts {
  /** Chunk data, in order (a view of the buffer given to `take`). */
  data(bytes: Buffer): void;
  /** One trailer field line (checked), as sent. */
  trailer(line: string): void;
}

/**
 * A chunked body (RFC 9112 §7.1), relayed with its coding, or, given `parts`, also decoded (for a
 * client that frames bodies its own way: HTTP/2).
 * @example new ChunkedFramer().take(Buffer.from('5\r\nhello\r\n0\r\n\r\nGET'), 0) // 15
 */
export class ChunkedFramer implements BodyFramer {
  constructor(private readonly parts?: ChunkedParts) {}

  private state = State.Size;
  private size = 0;
  private digits = 0;
  private line = '';
  private trailerBytes = 0;

  get done(): boolean {
    return this.state === State.Done;
  }

  take(buf: Buffer, start: number): number | string {
    let i = start;
    const end = buf.length;
    while (i < end && this.state !== State.Done) {
      if (this.state === State.Data) {
        const n = Math.min(this.size, end - i);
        if (this.parts && n > 0) this.parts.data(buf.subarray(i, i + n));
        this.size -= n;
        i += n;
        if (this.size === 0) this.state = State.DataCr;
        continue;
      }
      const error = this.step(buf[i]!);
      if (error !== undefined) return error;
      i++;
    }
    return i - start;
  }

  /** One byte of framing. */
  private step(c: number): string | undefined {
    switch (this.state) {
      case State.Size: {
        const v = hexValue(c);
        if (v >= 0) {
          if (++this.digits > 12) return 'a chunk size over the limit';
          this.size = this.size * 16 + v;
          return undefined;
        }
        if (this.digits === 0) return 'a chunk without a size';
        if (c === 0x0d) this.state = State.SizeLf;
        else if (c === 0x3b || c === 0x20 || c === 0x09) {
          this.state = State.Ext;
          this.line = String.fromCharCode(c);
        } else return 'an invalid chunk size';
        return undefined;
      }
      case State.Ext:
        if (c === 0x0d) {
          if (!CHUNK_EXT.test(this.line)) return 'an invalid chunk extension';
          this.state = State.SizeLf;
          return undefined;
        }
        if (this.line.length >= MAX_LINE) return 'a chunk extension over the limit';
        this.line += String.fromCharCode(c);
        return undefined;
      case State.SizeLf:
        if (c !== 0x0a) return 'a chunk size line not ended by CRLF';
        this.state = this.size === 0 ? State.TrailerStart : State.Data;
        this.digits = 0;
        return undefined;
      case State.DataCr:
        if (c !== 0x0d) return 'chunk data longer than its size';
        this.state = State.DataLf;
        return undefined;
      case State.DataLf:
        if (c !== 0x0a) return 'chunk data not ended by CRLF';
        this.state = State.Size;
        return undefined;
      case State.TrailerStart:
        if (c === 0x0d) {
          this.state = State.EndLf;
          return undefined;
        }
        if (c === 0x20 || c === 0x09) return 'obsolete line folding in a trailer';
        this.state = State.Trailer;
        this.line = String.fromCharCode(c);
        return undefined;
      case State.Trailer:
        if (c === 0x0d) {
          this.state = State.TrailerLf;
          return this.checkTrailer();
        }
        if (this.line.length >= MAX_LINE) return 'a trailer over the limit';
        this.line += String.fromCharCode(c);
        return undefined;
      case State.TrailerLf:
        if (c !== 0x0a) return 'a trailer not ended by CRLF';
        this.state = State.TrailerStart;
        return undefined;
      case State.EndLf:
        if (c !== 0x0a) return 'a chunked body not ended by CRLF';
        this.state = State.Done;
        return undefined;
      default:
        return undefined;
    }
  }

  private checkTrailer(): string | undefined {
    this.trailerBytes += this.line.length + 2;
    if (this.trailerBytes > MAX_TRAILERS) return 'trailers over the limit';
    const colon = this.line.indexOf(':');
    if (colon <= 0 || !isToken(this.line, 0, colon)) return 'a malformed trailer';
    if (!isFieldValue(this.line, colon + 1, this.line.length)) {
      return 'a control character in a trailer';
    }
    this.parts?.trailer(this.line);
    return undefined;
  }
}
