/**
 * The pages the ingress answers with itself, when a request cannot reach a tunnel. Browsers get
 * HTML, everything else plain text; both carry a `Burrow-Error-Code` header for scripts.
 */
import { STATUS_CODES } from 'node:http';
import { CODES } from '../../core/errors.js';
import { escapeHtml } from '../../core/html.js';
import { grpcHttp1Answer, pageGrpcStatus } from './grpc-answers.js';

/** Header naming why the ingress, not the upstream, answered. */
export const ERROR_CODE_HEADER = 'Burrow-Error-Code';

/** The ingress's own error answers. */
export const INGRESS_ERRORS = {
  /** No online tunnel serves the requested name. */
  tunnelNotFound: { status: 404, code: CODES.tunnelNotFound, title: 'Tunnel not found' },
  /** The tunnel exists but its agent or the service behind it could not be reached. */
  tunnelUnreachable: { status: 502, code: CODES.tunnelUnreachable, title: 'Bad gateway' },
  /** The Host names another endpoint than the TLS connection's SNI (sni-host-match.ts). */
  misdirected: {
    status: 421,
    code: CODES.misdirectedRequest,
    title: 'Misdirected Request',
  },
  /** A cloud endpoint's traffic policy neither answered nor forwarded the request. */
  cloudUnanswered: {
    status: 502,
    code: CODES.cloudEndpointUnhandled,
    title: 'Not handled by the endpoint',
  },
  /** forward-internal named an internal endpoint that is not online, or an invalid one. */
  internalOffline: {
    status: 502,
    code: CODES.internalEndpointOffline,
    title: 'Internal endpoint offline',
  },
  /** forward-internal went in a loop, or over the hop limit. */
  forwardLoop: { status: 508, code: CODES.forwardLoop, title: 'Loop Detected' },
  /** More header fields than `--max-header-count` allows. */
  tooManyHeaders: {
    status: 431,
    code: CODES.tooManyHeaders,
    title: 'Request Header Fields Too Large',
  },
  /** The request named no host at all. */
  missingHost: { status: 400, code: CODES.missingHost, title: 'Missing Host header' },
  /** A request target that cannot be read one way only (core/request-target.ts). */
  badRequestTarget: { status: 400, code: CODES.badRequestTarget, title: 'Bad request target' },
  /** The policy made the request head unwritable: a control character in a target or value. */
  unsafeRequestHead: {
    status: 400,
    code: CODES.unsafeRequestHead,
    title: 'Control character in the request',
  },
  /** A response head the edge was to write held a control character. */
  unsafeResponseHead: {
    status: 502,
    code: CODES.unsafeResponseHead,
    title: 'Control character in the response',
  },
  /** A plain HTTP request arrived on the HTTPS port. */
  plainHttpOnHttpsPort: {
    status: 400,
    code: CODES.plainHttpOnHttpsPort,
    title: 'Plain HTTP sent to the HTTPS port',
  },
} as const;

export type IngressError = (typeof INGRESS_ERRORS)[keyof typeof INGRESS_ERRORS];

/** What a page is about: the ingress's own errors, and a traffic policy's refusals. */
export interface PageError {
  status: number;
  code: string;
  title: string;
}

/** True when the client says it wants HTML (browsers do; curl and libraries do not). */
function wantsHtml(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('text/html');
}

/**
 * The body of an error page, as HTML or plain text.
 * @example errorPageBody(INGRESS_ERRORS.tunnelNotFound, 'No tunnel is online for x.example.com.', false)
 */
export function errorPageBody(error: PageError, message: string, html: boolean): string {
  if (!html) return `${error.status} ${error.title}\n\n${message}\n\n${error.code}\n`;
  return (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>${error.status} ${error.title}</title>` +
    '<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;' +
    'color:#222}h1{font-size:1.5rem}code{background:#f2f2f2;padding:0 .25rem}' +
    '.code{color:#777;font-size:.85rem}</style></head><body>' +
    `<h1>${error.title}</h1><p>${escapeHtml(message)}</p>` +
    `<p class="code">${error.code}</p></body></html>\n`
  );
}

/**
 * What a tunnel failure's page (`tunnelUnreachable`) says went wrong, in its parentheses: a code
 * the user can look up (`ECONNRESET`, `ERR_BURROW_MUX_STREAM_REFUSED`), or, for an error that
 * carries the page's own code, its sentence instead of that code a second time.
 * @example failureDetail(err) // 'ECONNREFUSED', or "the agent's session closed"
 */
export function failureDetail(err: NodeJS.ErrnoException): string {
  const code = err.code;
  return code !== undefined && code !== INGRESS_ERRORS.tunnelUnreachable.code ? code : err.message;
}

/**
 * The message of an error page for `host`.
 * @example errorMessage(INGRESS_ERRORS.tunnelNotFound, 'app.example.com')
 */
export function errorMessage(error: IngressError, host: string, detail?: string): string {
  switch (error.code) {
    case INGRESS_ERRORS.tunnelNotFound.code:
      return `No tunnel is online for ${host}. Start the agent that serves it, or check the name.`;
    case INGRESS_ERRORS.tunnelUnreachable.code:
      return (
        `The tunnel for ${host} is online, but the connection through it failed` +
        `${detail ? ` (${detail})` : ''}. Check that the agent and the service it forwards to ` +
        'are running.'
      );
    case INGRESS_ERRORS.misdirected.code:
      return `This TLS connection was made for another name than ${host}. Open a new connection to ${host} (its name in the TLS SNI).`;
    case INGRESS_ERRORS.cloudUnanswered.code:
      return `The cloud endpoint ${host} has no agent behind it, and its traffic policy neither answered this request nor forwarded it (add a custom-response, redirect or forward-internal rule that matches it).`;
    case INGRESS_ERRORS.internalOffline.code:
    case INGRESS_ERRORS.forwardLoop.code:
      return detail ?? `The request for ${host} could not be forwarded.`;
    case INGRESS_ERRORS.plainHttpOnHttpsPort.code:
      return 'This port speaks HTTPS (TLS). Use an https:// URL, or the HTTP port for http://.';
    case INGRESS_ERRORS.tooManyHeaders.code:
      return `The request has more header fields than the ${detail ?? ''} this server accepts (--max-header-count). Send fewer.`;
    case INGRESS_ERRORS.missingHost.code:
      return 'The request has no Host header, so it cannot be routed to a tunnel. Send one naming the endpoint, e.g. Host: app.example.com.';
    case INGRESS_ERRORS.badRequestTarget.code:
      return `The request target cannot be served (${detail ?? 'malformed'}). Send a path such as /a/b?c=1, or a URL whose host is the Host header.`;
    case INGRESS_ERRORS.unsafeRequestHead.code:
      return `The endpoint's traffic policy made a request that cannot be written (${detail ?? 'a control character'}); nothing was sent to the service.`;
    case INGRESS_ERRORS.unsafeResponseHead.code:
      return `The response for ${host} cannot be written (${detail ?? 'a control character'}); it was not sent.`;
  }
}

/**
 * What a gRPC client is told of a policy's answer of status 300 or more (a refusal): its message,
 * and the headers to send with the status (the refusal's code among them).
 * @example const { message, headers } = grpcRefusal(decision);
 */
export function grpcRefusal(answer: {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: string;
  refusal?: { code: string; message: string } | undefined;
}): { message: string; headers: Record<string, string> } {
  const message = answer.refusal?.message ?? (answer.body || reasonOf(answer.status));
  const code: Record<string, string> = answer.refusal
    ? { [ERROR_CODE_HEADER]: answer.refusal.code }
    : {};
  return { message, headers: { ...answer.headers, ...code } };
}

/**
 * An answer the HTTP/1.1 relay writes to a gRPC client in place of `answer` (a policy's refusal)
 * or of the edge's page `error`: the gRPC status as a trailers-only head (grpc-answers.ts).
 * @example writeAnswer(head, grpcAnswerOnHttp1({ answer: decision }));
 */
export function grpcAnswerOnHttp1(
  of:
    | { answer: Parameters<typeof grpcRefusal>[0] }
    | { error: IngressError; host: string; detail?: string | undefined },
): { status: number; headers: Record<string, string>; body: string } {
  if ('answer' in of) {
    const { message, headers } = grpcRefusal(of.answer);
    return grpcHttp1Answer(of.answer.status, message, headers);
  }
  const page = grpcPage(of.error, of.host, of.detail);
  return grpcHttp1Answer(of.error.status, page.message, page.headers, page.grpcStatus);
}

/**
 * What a gRPC client is told in place of the edge's page `error`: its message, the edge's code,
 * and the gRPC status (no endpoint, or its agent unreachable: the service is unavailable).
 * @example const { message, headers, grpcStatus } = grpcPage(INGRESS_ERRORS.tunnelNotFound, host);
 */
export function grpcPage(
  error: IngressError,
  host: string,
  detail?: string,
): { message: string; headers: Record<string, string>; grpcStatus: number } {
  return {
    message: errorMessage(error, host, detail),
    headers: { [ERROR_CODE_HEADER]: error.code },
    grpcStatus: pageGrpcStatus(error.status),
  };
}

/**
 * An ingress error page as an answer: its status, headers (no length) and body, HTML for a
 * browser (by `accept`), text otherwise.
 * @example const page = errorPage(INGRESS_ERRORS.tunnelNotFound, 'app.example.com', 'text/html');
 */
export function errorPage(
  error: IngressError,
  host: string,
  accept: string | undefined,
  detail?: string,
): { status: number; headers: Record<string, string>; body: string } {
  const html = wantsHtml(accept);
  return {
    status: error.status,
    headers: {
      'content-type': html ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8',
      'cache-control': 'no-store',
      [ERROR_CODE_HEADER.toLowerCase()]: error.code,
    },
    body: errorPageBody(error, errorMessage(error, host, detail), html),
  };
}

/**
 * The page of a refusal a traffic policy made without a body of its own (restrict-ips, deny):
 * HTML for browsers, text otherwise, and the Burrow-Error-Code header, as the ingress's own pages.
 * @example refusalPage({ code: 'ERR_BURROW_IP_RESTRICTED', title: 'Forbidden', message }, 403, req.headers.accept)
 */
export function refusalPage(
  refusal: { code: string; title: string; message: string },
  status: number,
  accept: string | undefined,
): { body: string; headers: Record<string, string> } {
  const html = wantsHtml(accept);
  return {
    body: errorPageBody(
      { status, code: refusal.code, title: refusal.title },
      refusal.message,
      html,
    ),
    headers: {
      'content-type': html ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8',
      'cache-control': 'no-store',
      [ERROR_CODE_HEADER.toLowerCase()]: refusal.code,
    },
  };
}

/**
 * A complete raw HTTP/1.1 error response, for sockets no longer owned by the HTTP server
 * (upgrades) or that never were (plain HTTP on the HTTPS port). Ends with `connection: close`.
 * @example socket.end(rawErrorResponse(INGRESS_ERRORS.tunnelUnreachable, 'app.example.com'));
 */
export function rawErrorResponse(error: IngressError, host: string, detail?: string): string {
  return rawText(rawAnswer(errorPage(error, host, undefined, detail), { close: true }));
}

/** The reason phrase of `status`: a status line never reads `500 OK`. */
export function reasonOf(status: number): string {
  return STATUS_CODES[status] ?? 'Unknown';
}

/** An answer the edge makes, as raw HTTP/1.1: the head (latin1) and the body (UTF-8). */
export interface RawAnswer {
  head: string;
  body: string;
  /** The headers as written, names and values alternating (for the inspector). */
  raw: string[];
}

/**
 * The headers and body of an answer the edge makes: a refusal without a body of its own gets the
 * refusal page, its variant by `accept` (HTML for browsers). Both wires write this.
 * @example const { headers, body } = answerContent(decision, req.headers.accept);
 */
export function answerContent(
  d: {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: string;
    refusal?: { code: string; title: string; message: string } | undefined;
  },
  accept: string | undefined,
): { headers: Readonly<Record<string, string>>; body: string } {
  if (!d.refusal || d.body !== '') return d;
  const page = refusalPage(d.refusal, d.status, accept);
  return { headers: { ...d.headers, ...page.headers }, body: page.body };
}

/**
 * An answer the edge makes (a policy's, whose headers passed headersProblem, or its own page) as
 * HTTP/1.1: the refusal page when it has no body of its own (its variant by `accept`), no body for
 * a HEAD request, `connection: close` when the connection ends after it. The one writer of raw
 * answers: the lean relay, upgrades and sockets the HTTP server never owned all use it.
 * @example const a = rawAnswer(decision, { close: false, accept: 'text/html' }); socket.write(a.head, 'latin1'); socket.write(a.body);
 */
export function rawAnswer(
  d: {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: string;
    refusal?: { code: string; title: string; message: string } | undefined;
  },
  options: {
    close: boolean;
    accept?: string | undefined;
    method?: string;
    /** The request was HTTP/1.0: a connection kept open must say so (`connection: keep-alive`). */
    http10?: boolean;
  },
): RawAnswer {
  const { headers, body } = answerContent(d, options.accept);
  // As Node's server dates what it writes (RFC 9110 §6.6.1: the edge is the origin here).
  const raw: string[] = ['date', new Date().toUTCString()];
  let head = `HTTP/1.1 ${d.status} ${reasonOf(d.status)}\r\ndate: ${raw[1]}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (name === 'content-length' || name === 'connection' || name === 'date') continue;
    head += `${name}: ${value}\r\n`;
    raw.push(name, value);
  }
  const length = String(Buffer.byteLength(body));
  head += `content-length: ${length}\r\n`;
  raw.push('content-length', length);
  if (options.close) head += 'connection: close\r\n';
  else if (options.http10) head += 'connection: keep-alive\r\n';
  return { head: head + '\r\n', body: options.method === 'HEAD' ? '' : body, raw };
}

/** {@link rawAnswer}'s head and body as one string, for a socket that ends with it. */
export function rawText(answer: RawAnswer): string {
  return answer.head + answer.body;
}
