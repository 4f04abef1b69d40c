/**
 * A strict reader of HTTP/1.1 request heads (RFC 9112 §3, §6). What it accepts is what the edge
 * forwards, byte for byte; what is ambiguous (Content-Length with Transfer-Encoding, two lengths,
 * a coding other than chunked, obs-fold, bare LF, control bytes) is refused, never repaired, so
 * the agent cannot read a request in a different shape than the edge judged it. The request target
 * is the exception: it is read once (core/request-target.ts) and written as read.
 */
import { readRequestTarget } from '../../../core/request-target.js';
import { isToken, parseFieldLine, type HeadError } from './head-syntax.js';

/** A request head as the relay needs it. */
export interface RequestHead {
  method: string;
  /**
   * The request target as read once (core/request-target.ts): origin-form, dot segments removed,
   * an absolute-form target's host checked against Host. The policy judges it, the relay writes it.
   */
  target: string;
  /** 1 for HTTP/1.1, 0 for HTTP/1.0. */
  minor: 0 | 1;
  /** The request came on HTTP/2 (h2-head.ts), and goes on to the agent as HTTP/1.1. */
  h2: boolean;
  /** Names and values alternating, as sent (Node's `rawHeaders` shape). */
  raw: string[];
  host: string | undefined;
  /** Content-Length, when the body is framed by one. */
  contentLength: number | undefined;
  chunked: boolean;
  /** The client said `Connection: close` (or spoke HTTP/1.0 without keep-alive). */
  close: boolean;
  /** `Connection: upgrade` with an `Upgrade` header. */
  upgrade: boolean;
  /** The `Connection` header's value, for the names it declares hop-by-hop. */
  connection: string | undefined;
  /** The `Accept` header (error pages answer HTML to browsers). */
  accept: string | undefined;
  /** The `Content-Type` header (a gRPC client is answered with a status, not a page). */
  contentType: string | undefined;
}

/** The limits a request head is held to. */
export interface RequestHeadLimits {
  /** Bytes of the whole head; over it is a 431 (the request line alone over it, a 414). */
  maxHeaderBytes: number;
}

const DIGITS = /^\d{1,15}$/;

function refuse(status: number, reason: string, limit?: string): HeadError {
  return limit === undefined ? { status, reason } : { status, reason, limit };
}

/** The request line `method SP target SP HTTP/1.x`. */
function parseRequestLine(
  line: string,
): Pick<RequestHead, 'method' | 'target' | 'minor'> | HeadError {
  const sp1 = line.indexOf(' ');
  const sp2 = sp1 < 0 ? -1 : line.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || line.indexOf(' ', sp2 + 1) >= 0) {
    return refuse(400, 'a malformed request line');
  }
  if (!isToken(line, 0, sp1)) return refuse(400, 'an invalid method');
  for (let i = sp1 + 1; i < sp2; i++) {
    const c = line.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) return refuse(400, 'a control character in the request target');
  }
  if (sp2 === sp1 + 1) return refuse(400, 'an empty request target');
  const version = line.slice(sp2 + 1);
  if (version !== 'HTTP/1.1' && version !== 'HTTP/1.0') {
    return /^HTTP\/\d\.\d$/.test(version)
      ? refuse(505, 'an HTTP version other than 1.0 and 1.1')
      : refuse(400, 'a malformed HTTP version');
  }
  return {
    method: line.slice(0, sp1),
    target: line.slice(sp1 + 1, sp2),
    minor: version === 'HTTP/1.1' ? 1 : 0,
  };
}

/** Transfer-Encoding's codings: only `chunked`, once and last, is carried. */
function checkCodings(value: string, minor: 0 | 1): HeadError | undefined {
  if (minor === 0) return refuse(400, 'Transfer-Encoding in an HTTP/1.0 request');
  const codings = value.split(',').map((c) => c.trim().toLowerCase());
  if (codings[codings.length - 1] !== 'chunked') {
    return refuse(400, 'a Transfer-Encoding that does not end in chunked');
  }
  if (codings.length > 1) return refuse(501, 'a transfer coding other than chunked');
  return undefined;
}

/**
 * Why a request head is refused. `refusedTarget` is a head read whole whose target the edge reads
 * no single way (core/request-target.ts): it is answered like any request the edge refuses, with
 * its page (which names the problem), not a bare status.
 */
export interface HeadRefusal extends HeadError {
  refusedTarget?: RequestHead;
}

/**
 * Read the request head `text` (latin1, through its empty line, as {@link HeadScanner} found it).
 * @example parseRequestHead('GET / HTTP/1.1\r\nHost: a\r\n\r\n', { maxHeaderBytes: 16384 }).host // 'a'
 */
export function parseRequestHead(
  text: string,
  limits: RequestHeadLimits,
): RequestHead | HeadRefusal {
  const lineEnd = text.indexOf('\r\n');
  if (lineEnd > limits.maxHeaderBytes) {
    return refuse(414, 'a request line over the limit', 'ingress_header_bytes');
  }
  if (text.length > limits.maxHeaderBytes) {
    return refuse(431, 'a head over the limit', 'ingress_header_bytes');
  }
  const line = parseRequestLine(text.slice(0, lineEnd));
  if ('status' in line) return line;
  // Fields named one by one: a spread here (`...line`) made V8 build this object on a slow path,
  // ~20 µs a head, more than the whole rest of the reading.
  const head: RequestHead = {
    method: line.method,
    target: line.target,
    minor: line.minor,
    h2: false,
    raw: [],
    host: undefined,
    contentLength: undefined,
    chunked: false,
    close: line.minor === 0,
    upgrade: false,
    connection: undefined,
    accept: undefined,
    contentType: undefined,
  };
  let transferEncoding: string | undefined;
  let upgradeHeader = false;
  let start = lineEnd + 2;
  const end = text.length - 2;
  while (start < end) {
    const lf = text.indexOf('\r\n', start);
    const field = parseFieldLine(text, start, lf);
    if (typeof field === 'string') return refuse(400, field);
    start = lf + 2;
    head.raw.push(field.name, field.value);
    const value = field.value;
    switch (field.name.length) {
      case 4:
        if (field.name.toLowerCase() !== 'host') break;
        if (head.host !== undefined) return refuse(400, 'two Host headers');
        head.host = value;
        break;
      case 6:
        if (field.name.toLowerCase() === 'accept') head.accept = value;
        break;
      case 7:
        if (field.name.toLowerCase() === 'upgrade') upgradeHeader = true;
        break;
      case 12:
        if (field.name.toLowerCase() === 'content-type') head.contentType = value;
        break;
      case 10:
        if (field.name.toLowerCase() !== 'connection') break;
        head.connection = head.connection === undefined ? value : `${head.connection}, ${value}`;
        break;
      case 14:
        if (field.name.toLowerCase() !== 'content-length') break;
        if (head.contentLength !== undefined) return refuse(400, 'two Content-Length headers');
        if (!DIGITS.test(value)) return refuse(400, 'a malformed Content-Length');
        head.contentLength = Number(value);
        break;
      case 17:
        if (field.name.toLowerCase() !== 'transfer-encoding') break;
        transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
        break;
    }
  }
  if (transferEncoding !== undefined) {
    if (head.contentLength !== undefined) {
      return refuse(400, 'both Content-Length and Transfer-Encoding');
    }
    const bad = checkCodings(transferEncoding, head.minor);
    if (bad) return bad;
    head.chunked = true;
  }
  if (head.connection !== undefined) {
    for (const token of head.connection.split(',')) {
      const name = token.trim().toLowerCase();
      if (name === 'close') head.close = true;
      else if (name === 'keep-alive' && head.minor === 0) head.close = false;
      // HTTP/1.0 has no upgrades (RFC 9110 §7.8): such a request is read as a plain one.
      else if (name === 'upgrade') head.upgrade = upgradeHeader && head.minor === 1;
    }
  }
  const read = readRequestTarget(head.method, head.target, head.host);
  if ('problem' in read) return { status: 400, reason: read.problem, refusedTarget: head };
  head.target = read.target;
  return head;
}
