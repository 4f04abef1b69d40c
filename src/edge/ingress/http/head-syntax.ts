/**
 * The character rules of HTTP/1.1 message heads (RFC 9110 §5.6, RFC 9112 §5), shared by the
 * request and response head parsers and the chunked-body scanner. Everything works on latin1
 * strings: one byte is one UTF-16 unit, so `charCodeAt` sees the bytes that came off the wire.
 */

import { STATUS_CODES } from 'node:http';
import { isFieldValue, isToken } from '../../../core/http-wire.js';

// The character rules themselves are core's, shared with every place that writes a head.
export { isFieldValue, isToken };

/** Why a head was refused: the status to answer with, and a reason for logs. */
export interface HeadError {
  status: number;
  reason: string;
  /** The limit that was hit, for the refusal metric (`ingress_header_bytes`, …). */
  limit?: string;
}

/**
 * The answer to a request the relay will not read: its status, no body, and the connection
 * closed.
 * @example socket.end(bareRefusal(431));
 */
export function bareRefusal(status: number): string {
  const reason = STATUS_CODES[status] ?? 'Bad Request';
  return `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`;
}

/** One header line, split and checked: its name, its value without surrounding whitespace. */
export interface FieldLine {
  name: string;
  value: string;
}

/**
 * Split and check one field line (`name: value`) of `head[start, end)`. obs-fold, whitespace
 * before the colon and control characters are errors, not something to repair.
 * @example parseFieldLine('Host: a\r\n', 0, 7) // { name: 'Host', value: 'a' }
 */
export function parseFieldLine(head: string, start: number, end: number): FieldLine | string {
  const first = head.charCodeAt(start);
  if (first === 0x20 || first === 0x09) return 'obsolete line folding';
  const colon = head.indexOf(':', start);
  if (colon < 0 || colon >= end) return 'a header line without a colon';
  if (!isToken(head, start, colon)) return 'an invalid header name';
  let from = colon + 1;
  let to = end;
  while (from < to && (head.charCodeAt(from) === 0x20 || head.charCodeAt(from) === 0x09)) from++;
  while (to > from && (head.charCodeAt(to - 1) === 0x20 || head.charCodeAt(to - 1) === 0x09)) to--;
  if (!isFieldValue(head, from, to)) return 'a control character in a header value';
  return { name: head.slice(start, colon), value: head.slice(from, to) };
}

/**
 * Where the head that starts a buffer ends, found line by line so that a bare LF is refused as
 * soon as it arrives. `scan` keeps the position between calls, so a head that arrives in many
 * pieces is read once, not once per piece.
 */
export class HeadScanner {
  /** Index of the start of the line being read. */
  private lineStart = 0;
  /** Index from which to look for the next LF. */
  private from = 0;

  reset(): void {
    this.lineStart = 0;
    this.from = 0;
  }

  /**
   * The length of the head (through its empty line) in `buf`, `-1` when more is needed, or a
   * string saying why the bytes are not an HTTP head.
   * @example new HeadScanner().scan(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n\r\n')) // 27
   */
  scan(buf: Buffer): number | string {
    for (;;) {
      const lf = buf.indexOf(0x0a, this.from);
      if (lf < 0) {
        this.from = buf.length;
        return -1;
      }
      if (lf === 0 || buf[lf - 1] !== 0x0d) return 'a bare LF';
      this.from = lf + 1;
      const empty = lf - 1 === this.lineStart;
      this.lineStart = lf + 1;
      // Leading empty lines before a request line are tolerated (RFC 9112 §2.2); none are sent.
      if (empty && lf > 1) return lf + 1;
      if (empty) return 'an empty line before the start line';
    }
  }

  /** Whether the start line is complete (an oversize head is then a 431, not a 414). */
  get firstLineDone(): boolean {
    return this.lineStart > 0;
  }
}
