/**
 * The edge's own answers to gRPC calls: a refusal (a policy's deny, basic-auth, jwt-validation,
 * rate-limit…) or a failure at the edge (no tunnel, the agent unreachable) reaches a gRPC client
 * as a gRPC status, in a trailers-only response, instead of an HTML or text page it cannot read.
 */
import type { ServerResponse } from 'node:http';
import type { ServerHttp2Stream } from 'node:http2';

/** gRPC status codes the edge answers with (grpc/doc/statuscodes.md). */
export const GRPC_STATUS = {
  unknown: 2,
  permissionDenied: 7,
  resourceExhausted: 8,
  internal: 13,
  unimplemented: 12,
  unavailable: 14,
  unauthenticated: 16,
} as const;

/**
 * Whether a request with this Content-Type is a gRPC call (`application/grpc`, `+proto`, `+json`…).
 * @example isGrpc('application/grpc+proto') // true
 */
export function isGrpc(contentType: string | string[] | undefined): boolean {
  return typeof contentType === 'string' && /^application\/grpc(?:[+;]|$)/i.test(contentType);
}

/**
 * The gRPC status of an HTTP status, as gRPC's "HTTP to gRPC status code mapping" has it, except
 * 429: a rate limit is RESOURCE_EXHAUSTED (a client that retries UNAVAILABLE would only retry it).
 * @example grpcStatusOf(401) // 16 (UNAUTHENTICATED)
 */
export function grpcStatusOf(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GRPC_STATUS.internal;
    case 401:
      return GRPC_STATUS.unauthenticated;
    case 403:
      return GRPC_STATUS.permissionDenied;
    case 404:
      return GRPC_STATUS.unimplemented;
    case 429:
      return GRPC_STATUS.resourceExhausted;
    case 502:
    case 503:
    case 504:
      return GRPC_STATUS.unavailable;
    default:
      return GRPC_STATUS.unknown;
  }
}

/**
 * The gRPC status of the edge's own page with HTTP status `status`: no endpoint for the name (404)
 * or its agent unreachable means the service is unavailable; otherwise {@link grpcStatusOf}.
 * @example pageGrpcStatus(404) // 14 (UNAVAILABLE)
 */
export function pageGrpcStatus(status: number): number {
  return status === 404 ? GRPC_STATUS.unavailable : grpcStatusOf(status);
}

/**
 * `grpc-message` as the gRPC spec encodes it: printable ASCII but `%` as is, every other byte of
 * its UTF-8 percent-encoded.
 * @example grpcMessage('50% off') // '50%25 off'
 */
export function grpcMessage(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * Answer a gRPC call with the status of `httpStatus` and `message`, plus `headers` (the edge's
 * error code, a WWW-Authenticate…), in one HEADERS frame that ends the stream, as gRPC's
 * trailers-only responses are sent; `grpcStatus` when the HTTP status does not say it (default
 * {@link grpcStatusOf}). The response's status is left at `httpStatus` for the metrics.
 * @example writeGrpcStatus(res, 401, 'no token', { 'www-authenticate': 'Bearer' });
 */
export function writeGrpcStatus(
  res: ServerResponse,
  httpStatus: number,
  message: string,
  headers: Readonly<Record<string, string | number>>,
  grpcStatus = grpcStatusOf(httpStatus),
): void {
  const answer = grpcAnswerHeaders(message, headers, grpcStatus);
  const stream = (res as ServerResponse & { stream?: ServerHttp2Stream }).stream;
  if (stream && !stream.headersSent) {
    stream.respond({ ':status': 200, ...answer }, { endStream: true });
  } else {
    res.writeHead(200, answer);
    res.end();
  }
  // The wire says 200, as gRPC requires; the metrics and the inspector, read when the response
  // closes, count the refusal's own status on both wires.
  res.statusCode = httpStatus;
}

/**
 * {@link writeGrpcStatus} as an HTTP/1.1 answer the relay writes (error-pages.ts rawAnswer): `200`
 * with the status in its headers and no body, gRPC's trailers-only answer as a head.
 * @example rawAnswer(grpcHttp1Answer(403, 'denied', { 'burrow-error-code': code }), { close: false })
 */
export function grpcHttp1Answer(
  httpStatus: number,
  message: string,
  headers: Readonly<Record<string, string | number>>,
  grpcStatus = grpcStatusOf(httpStatus),
): { status: number; headers: Record<string, string>; body: string } {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(grpcAnswerHeaders(message, headers, grpcStatus))) {
    out[name] = String(value);
  }
  return { status: 200, headers: out, body: '' };
}

/** The headers of a trailers-only gRPC answer: `headers` with the answer's type and status. */
function grpcAnswerHeaders(
  message: string,
  headers: Readonly<Record<string, string | number>>,
  grpcStatus: number,
): Record<string, string | number> {
  const answer: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    // The body's framing and type are the gRPC answer's own.
    if (lower !== 'content-type' && lower !== 'content-length') answer[lower] = value;
  }
  answer['content-type'] = 'application/grpc';
  answer['grpc-status'] = String(grpcStatus);
  answer['grpc-message'] = grpcMessage(message);
  return answer;
}

/**
 * {@link writeGrpcStatus} on an HTTP/2 stream of the relay's pipeline (h2-exchange.ts): one
 * HEADERS frame that ends the stream. Returns the headers sent, as a raw list for the inspector.
 * @example respondGrpcH2(req.stream, 403, 'denied', { 'burrow-error-code': code });
 */
export function respondGrpcH2(
  stream: ServerHttp2Stream,
  httpStatus: number,
  message: string,
  headers: Readonly<Record<string, string | number>>,
  grpcStatus = grpcStatusOf(httpStatus),
): string[] {
  const answer = grpcAnswerHeaders(message, headers, grpcStatus);
  if (!stream.destroyed && !stream.headersSent) {
    try {
      stream.respond({ ':status': 200, ...answer }, { endStream: true });
    } catch {
      // A header Node will not send on HTTP/2: the call is reset rather than answered wrongly.
      stream.close(0x2);
    }
  }
  const raw: string[] = [];
  for (const [name, value] of Object.entries(answer)) raw.push(name, String(value));
  return raw;
}
