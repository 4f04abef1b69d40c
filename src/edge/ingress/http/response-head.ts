/**
 * A reader of the HTTP/1.1 response heads agents send back (RFC 9112 §4, §6.3): the status, the
 * headers the public client gets, and how the body is framed, which decides where the response
 * ends and whether the tunnel stream can carry the next request.
 */
import { HOP_BY_HOP_HEADERS } from '../../../core/http-framing.js';
import { isFieldValue, parseFieldLine, type HeadError } from './head-syntax.js';
import { connectionListed } from './http-forwarding.js';

/** How a response body ends. */
export type ResponseFraming =
  | { kind: 'none' }
  | { kind: 'length'; length: number }
  | { kind: 'chunked' }
  /** Read until the agent ends the stream; the public connection closes after it. */
  | { kind: 'close' };

export interface ResponseHead {
  status: number;
  reason: string;
  /** Headers for the public client: hop-by-hop and `Connection`-listed ones removed. */
  raw: string[];
  framing: ResponseFraming;
  /** The agent will not send another response on this stream. */
  close: boolean;
  /**
   * A 101 that says what the bytes after it are (`Connection: upgrade` and an `Upgrade` header);
   * its `raw` then keeps every field as sent, for the client's 101.
   */
  upgrade: boolean;
}

const DIGITS = /^\d{1,15}$/;

/**
 * The lengths of the header names this reader looks at (the hop-by-hop ones, Content-Length): a
 * name of another length is passed on without being lower-cased, which most names of a response
 * (Date, Content-Type, ...) are.
 */
const LOOKED_AT = new Uint8Array(32);
for (const name of [...HOP_BY_HOP_HEADERS, 'content-length', 'upgrade']) LOOKED_AT[name.length] = 1;

/**
 * Read the response head `text` (latin1, through its empty line) to a request with `method`.
 * @example parseResponseHead('HTTP/1.1 204 No Content\r\n\r\n', 'GET').framing // { kind: 'none' }
 */
export function parseResponseHead(text: string, method: string): ResponseHead | HeadError {
  const lineEnd = text.indexOf('\r\n');
  const line = statusLine(text, lineEnd);
  if (line === undefined) return { status: 502, reason: 'a malformed status line' };
  const { status, minor, reason } = line;
  if (status < 100) return { status: 502, reason: 'a status code under 100' };
  // The reason phrase is relayed as it came (exchange.ts): it must be writable as it is.
  if (reason.length > 0 && !isFieldValue(reason)) {
    return { status: 502, reason: 'a control character in the reason phrase' };
  }
  const fields: string[] = [];
  let connection: string | undefined;
  let contentLength: string | undefined;
  let transferEncoding: string | undefined;
  let upgradeHeader = false;
  let start = lineEnd + 2;
  const end = text.length - 2;
  while (start < end) {
    const lf = text.indexOf('\r\n', start);
    const field = parseFieldLine(text, start, lf);
    if (typeof field === 'string') return { status: 502, reason: field };
    start = lf + 2;
    const name = field.name;
    // Lower-cased only when it may be a name looked at (a string per header saved otherwise).
    const lower = name.length < 32 && LOOKED_AT[name.length] === 1 ? name.toLowerCase() : '';
    if (lower === '') {
      fields.push(name, field.value);
      continue;
    }
    if (lower === 'connection') {
      connection = connection === undefined ? field.value : `${connection}, ${field.value}`;
    } else if (lower === 'content-length') {
      if (contentLength !== undefined && contentLength !== field.value) {
        return { status: 502, reason: 'two different Content-Length headers' };
      }
      contentLength = field.value;
    } else if (lower === 'transfer-encoding') {
      transferEncoding =
        transferEncoding === undefined ? field.value : `${transferEncoding}, ${field.value}`;
    } else if (lower === 'upgrade') {
      upgradeHeader = true;
    }
    if (status === 101 || !HOP_BY_HOP_HEADERS.has(lower)) fields.push(name, field.value);
  }
  const tokens = connection === undefined ? '' : connection.toLowerCase();
  if (status === 101) {
    // The client's 101 carries the agent's fields as they came: after it nothing is HTTP.
    const upgrade = upgradeHeader && /\bupgrade\b/.test(tokens);
    return { status, reason, raw: fields, framing: { kind: 'none' }, close: true, upgrade };
  }
  let close = minor === 0 ? !/\bkeep-alive\b/.test(tokens) : /\bclose\b/.test(tokens);
  let framing: ResponseFraming;
  if (method === 'HEAD' || status < 200 || status === 204 || status === 304) {
    framing = NO_BODY;
  } else if (transferEncoding !== undefined) {
    const last = transferEncoding.split(',').pop()?.trim().toLowerCase();
    if (last !== 'chunked') return { status: 502, reason: 'a transfer coding other than chunked' };
    framing = CHUNKED;
  } else if (contentLength !== undefined) {
    if (!DIGITS.test(contentLength)) return { status: 502, reason: 'a malformed Content-Length' };
    framing = { kind: 'length', length: Number(contentLength) };
  } else {
    framing = TO_CLOSE;
  }
  if (framing.kind === 'close') close = true;
  // The body is relayed as it came: a chunked one keeps its coding on the public side.
  if (framing.kind === 'chunked') fields.push('Transfer-Encoding', 'chunked');
  let listed = connection === undefined ? undefined : connectionListed(connection);
  // With chunked framing a Content-Length is wrong (RFC 9112 §6.3): it must not reach the client.
  if (framing.kind === 'chunked' && contentLength !== undefined) {
    (listed ??= new Set<string>()).add('content-length');
  }
  const raw = listed === undefined || listed.size === 0 ? fields : withoutNames(fields, listed);
  return { status, reason, raw, framing, close, upgrade: false };
}

/** Framings without a length, shared: nothing writes into a framing once read. */
const NO_BODY: ResponseFraming = Object.freeze({ kind: 'none' });
const CHUNKED: ResponseFraming = Object.freeze({ kind: 'chunked' });
const TO_CLOSE: ResponseFraming = Object.freeze({ kind: 'close' });

/**
 * The status line `text[0, lineEnd)` read as `HTTP/1.x SSS[ reason]` (x 0 or 1, the reason
 * without CR or LF), or undefined: what the regular expression
 * `/^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/` accepts, without its match array and strings.
 */
function statusLine(
  text: string,
  lineEnd: number,
): { status: number; minor: number; reason: string } | undefined {
  if (lineEnd < 12 || !text.startsWith('HTTP/1.')) return undefined;
  const minor = text.charCodeAt(7) - 0x30;
  if ((minor !== 0 && minor !== 1) || text.charCodeAt(8) !== 0x20) return undefined;
  const d0 = text.charCodeAt(9) - 0x30;
  const d1 = text.charCodeAt(10) - 0x30;
  const d2 = text.charCodeAt(11) - 0x30;
  if (!(d0 >= 0 && d0 <= 9 && d1 >= 0 && d1 <= 9 && d2 >= 0 && d2 <= 9)) return undefined;
  let reason = '';
  if (lineEnd > 12) {
    if (text.charCodeAt(12) !== 0x20) return undefined;
    reason = text.slice(13, lineEnd);
    if (reason.includes('\r') || reason.includes('\n')) return undefined;
  }
  return { status: d0 * 100 + d1 * 10 + d2, minor, reason };
}

/** `fields` without the headers named in `listed`. */
function withoutNames(fields: string[], listed: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    if (!listed.has(fields[i]!.toLowerCase())) out.push(fields[i]!, fields[i + 1]!);
  }
  return out;
}
