/**
 * HTTP/2 messages as the lean relay's pipeline reads and writes them (h2-exchange.ts): a request's
 * head read into the `RequestHead` an HTTP/1.1 request gets, an agent's HTTP/1.1 response head as
 * HTTP/2 headers, and the answers the edge makes itself written as HTTP/2.
 */
import { randomBytes } from 'node:crypto';
import type { Http2ServerRequest, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { readRequestTarget } from '../../../core/request-target.js';
import { answerContent, errorPage, grpcPage, type IngressError } from '../error-pages.js';
import { isGrpc, respondGrpcH2 } from '../grpc-answers.js';
import type { RequestHead } from './request-head.js';
import type { ResponseHead } from './response-head.js';
import type { Exchange } from './exchange.js';
import { CONNECTION_SPECIFIC } from './h2-upstream.js';

const DIGITS = /^\d{1,15}$/;
/**
 * Headers an HTTP/2 response never carries (RFC 9113 8.2.2; Node refuses to send them): those
 * HTTP/2 does not carry at all, `te`, and `host`.
 */
export const NOT_IN_RESPONSES: ReadonlySet<string> = new Set([
  ...CONNECTION_SPECIFIC,
  'te',
  'host',
]);

/** Why an HTTP/2 request cannot be read as the relay reads requests (h2RequestHead). */
export type H2HeadProblem =
  /** A target the edge reads no single way (a `:path` it refuses): `head` gets the edge's page. */
  | { badTarget: string; head: RequestHead }
  /** A message RFC 9113 §8.1.1 calls malformed (a `content-length` not a number): reset. */
  | { malformed: string };

/**
 * The head of an HTTP/2 request as the relay reads an HTTP/1.1 one, or why it cannot be read (a
 * target the edge refuses, a malformed length): Host from `:authority` when the client sent no
 * Host, a body without a length sent on chunked. An extended CONNECT (RFC 8441, `:protocol`:
 * WebSocket over HTTP/2) reads as the HTTP/1.1 upgrade it stands for: `GET` with `Upgrade:
 * <:protocol>`, no body before the switch, and for WebSocket the handshake's `Sec-WebSocket-Key`,
 * which HTTP/2 does without, made here (the service's `Sec-WebSocket-Accept` is not passed back).
 * @example const head = h2RequestHead(req); if ('badTarget' in head) refuse(head.badTarget);
 */
export function h2RequestHead(req: Http2ServerRequest): RequestHead | H2HeadProblem {
  const headers = req.headers;
  const path = headers[':path'];
  const protocol = stringOf(headers[':protocol']);
  const upgrade = headers[':method'] === 'CONNECT' && protocol !== undefined;
  const method = upgrade ? 'GET' : headers[':method'];
  if (typeof method !== 'string' || typeof path !== 'string') {
    // Node's server answers CONNECT itself (405) before a request exists; nghttp2 resets the rest.
    return { malformed: 'a request without :method or :path' };
  }
  const given = req.rawHeaders;
  const raw: string[] = [];
  let host = typeof headers.host === 'string' ? headers.host : undefined;
  if (host === undefined && req.authority) {
    host = req.authority;
    raw.push('host', host);
  }
  for (let i = 0; i < given.length; i += 2) {
    const name = given[i]!;
    if (name.charCodeAt(0) === 0x3a || (upgrade && name.toLowerCase() === 'content-length')) {
      continue;
    }
    raw.push(name, given[i + 1]!);
  }
  const length = upgrade ? undefined : headers['content-length'];
  if (length !== undefined && (typeof length !== 'string' || !DIGITS.test(length))) {
    return { malformed: 'a content-length that is not a number' };
  }
  // A body without a length is framed as HTTP/1.1 would frame it, and so the policy sees it (as
  // an HTTP/1.1 service gets it).
  const chunked = !upgrade && length === undefined && !req.stream.endAfterHeaders;
  if (chunked) raw.push('transfer-encoding', 'chunked');
  if (upgrade) {
    raw.push('upgrade', protocol);
    if (protocol.toLowerCase() === 'websocket' && headers['sec-websocket-key'] === undefined) {
      raw.push('sec-websocket-key', randomBytes(16).toString('base64'));
    }
  }
  const head: RequestHead = {
    method,
    target: path,
    minor: 1,
    h2: true,
    raw,
    host,
    contentLength: length === undefined ? undefined : Number(length),
    chunked,
    close: false,
    upgrade,
    connection: upgrade ? 'upgrade' : undefined,
    accept: stringOf(headers.accept),
    contentType: stringOf(headers['content-type']),
  };
  const read = readRequestTarget(method, path, host);
  if ('problem' in read) return { badTarget: read.problem, head };
  head.target = read.target;
  return head;
}

function stringOf(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * Answer an HTTP/2 stream with an answer the edge made (a policy's, or its own page, with
 * answerContent's refusal page); returns the headers as written, for the inspector.
 * @example respondH2(stream, errorPage(error, host, head.accept), head.method);
 */
export function respondH2(
  stream: ServerHttp2Stream,
  answer: {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: string;
    refusal?: { code: string; title: string; message: string } | undefined;
  },
  head: Pick<RequestHead, 'method' | 'accept'>,
): string[] {
  const { headers, body } = answerContent(answer, head.accept);
  const raw: string[] = [];
  const out: OutgoingHttpHeaders = { ':status': answer.status };
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (lower === 'content-length' || NOT_IN_RESPONSES.has(lower)) continue;
    out[lower] = value;
    raw.push(lower, value);
  }
  const length = String(Buffer.byteLength(body));
  out['content-length'] = length;
  raw.push('content-length', length);
  if (stream.destroyed || stream.headersSent) return raw;
  const empty = head.method === 'HEAD' || body === '';
  stream.respond(out, { endStream: empty });
  if (!empty) stream.end(body);
  return raw;
}

/**
 * The agent's response headers as HTTP/2 headers: lower-case, repeated ones as lists.
 * @example stream.respond(h2Headers(response));
 */
export function h2Headers(response: ResponseHead): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':status': response.status };
  const raw = response.raw;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (NOT_IN_RESPONSES.has(name)) continue;
    const value = raw[i + 1]!;
    const before = out[name];
    if (before === undefined) out[name] = value;
    else if (Array.isArray(before)) before.push(value);
    else out[name] = [String(before), value];
  }
  return out;
}

/**
 * A chunked body's trailer lines as the fields of HTTP/2's trailing HEADERS (Node's response
 * object sends those it holds when the stream asks for them: 'wantTrailers'), without those an
 * HTTP/2 response cannot carry.
 * @example res.addTrailers(h2Trailers(['Grpc-Status: 0']));
 */
export function h2Trailers(lines: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    if (NOT_IN_RESPONSES.has(name) || name === 'content-length') continue;
    out[name] = line.slice(colon + 1).trim();
  }
  return out;
}

/**
 * The edge's page `error` on an HTTP/2 stream, as the HTTP/1.1 relay writes it: a gRPC
 * status to a gRPC client (its service unavailable for a 404 or an unreachable agent), else the
 * page, HTML to a browser. Returns the headers written, as a raw list for the inspector.
 * @example respondPageH2(req.stream, INGRESS_ERRORS.tunnelUnreachable, host, head, 'ECONNRESET');
 */
export function respondPageH2(
  stream: ServerHttp2Stream,
  error: IngressError,
  host: string,
  head: Pick<RequestHead, 'method' | 'accept' | 'contentType'>,
  detail?: string,
): string[] {
  if (!isGrpc(head.contentType))
    return respondH2(stream, errorPage(error, host, head.accept, detail), head);
  const page = grpcPage(error, host, detail);
  return respondGrpcH2(stream, error.status, page.message, page.headers, page.grpcStatus);
}

/**
 * The inspector's copy of the body of an answer the edge wrote in place of the service's.
 * @example respondH2(stream, answer, head); captureAnswer(exchange, answer);
 */
export function captureAnswer(
  exchange: Exchange,
  answer: Parameters<typeof answerContent>[0],
): void {
  const bodies = exchange.bodies;
  if (!bodies || exchange.head.method === 'HEAD') return;
  bodies.response.add(Buffer.from(answerContent(answer, exchange.head.accept).body));
}
