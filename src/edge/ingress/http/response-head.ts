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
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;

/**
 * Read the response head `text` (latin1, through its empty line) to a request with `method`.
 * @example parseResponseHead('HTTP/1.1 204 No Content\r\n\r\n', 'GET').framing // { kind: 'none' }
 */
export function parseResponseHead(text: string, method: string): ResponseHead | HeadError {
  const lineEnd = text.indexOf('\r\n');
  const line = STATUS_LINE.exec(text.slice(0, lineEnd));
  if (!line) return { status: 502, reason: 'a malformed status line' };
  const status = Number(line[2]);
  if (status < 100) return { status: 502, reason: 'a status code under 100' };
  // The reason phrase is relayed as it came (exchange.ts): it must be writable as it is.
  if (line[3] !== undefined && !isFieldValue(line[3])) {
    return { status: 502, reason: 'a control character in the reason phrase' };
  }
  const minor = line[1] === '1' ? 1 : 0;
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
    const lower = field.name.toLowerCase();
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
    if (status === 101 || !HOP_BY_HOP_HEADERS.has(lower)) fields.push(field.name, field.value);
  }
  const tokens = (connection ?? '').toLowerCase();
  if (status === 101) {
    // The client's 101 carries the agent's fields as they came: after it nothing is HTTP.
    const upgrade = upgradeHeader && /\bupgrade\b/.test(tokens);
    return {
      status,
      reason: line[3] ?? '',
      raw: fields,
      framing: { kind: 'none' },
      close: true,
      upgrade,
    };
  }
  let close = minor === 0 ? !/\bkeep-alive\b/.test(tokens) : /\bclose\b/.test(tokens);
  let framing: ResponseFraming;
  if (method === 'HEAD' || status < 200 || status === 204 || status === 304) {
    framing = { kind: 'none' };
  } else if (transferEncoding !== undefined) {
    const last = transferEncoding.split(',').pop()?.trim().toLowerCase();
    if (last !== 'chunked') return { status: 502, reason: 'a transfer coding other than chunked' };
    framing = { kind: 'chunked' };
  } else if (contentLength !== undefined) {
    if (!DIGITS.test(contentLength)) return { status: 502, reason: 'a malformed Content-Length' };
    framing = { kind: 'length', length: Number(contentLength) };
  } else {
    framing = { kind: 'close' };
  }
  if (framing.kind === 'close') close = true;
  // The body is relayed as it came: a chunked one keeps its coding on the public side.
  if (framing.kind === 'chunked') fields.push('Transfer-Encoding', 'chunked');
  const listed = connectionListed(connection) ?? new Set<string>();
  // With chunked framing a Content-Length is wrong (RFC 9112 §6.3): it must not reach the client.
  if (framing.kind === 'chunked' && contentLength !== undefined) listed.add('content-length');
  const raw = listed.size === 0 ? fields : withoutNames(fields, listed);
  return { status, reason: line[3] ?? '', raw, framing, close, upgrade: false };
}

/** `fields` without the headers named in `listed`. */
function withoutNames(fields: string[], listed: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    if (!listed.has(fields[i]!.toLowerCase())) out.push(fields[i]!, fields[i + 1]!);
  }
  return out;
}
