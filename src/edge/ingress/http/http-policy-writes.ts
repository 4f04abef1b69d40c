/**
 * What the ingress writes for a traffic policy, apart from the request it forwards: its answers
 * (custom-response, redirect, deny, …) on a response or raw on an upgrade's socket, the page of a
 * policy that failed, and the check of what the policy made of the request (a rewritten target,
 * added headers) before it is written. A template may render client input into any of these, so
 * each is checked where it is written: a control character is refused, never written.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import { CODES } from '../../../core/errors.js';
import { fieldProblem, headersProblem, isTargetText } from '../../../core/http-wire.js';
import { normalizeOriginForm } from '../../../core/request-target.js';
import type { HeaderChanges, Refusal, RespondDecision } from '../../../policy/index.js';
import { isGrpc, writeGrpcStatus } from '../grpc-answers.js';
import {
  ERROR_CODE_HEADER,
  INGRESS_ERRORS,
  rawErrorResponse,
  refusalPage,
  sendErrorPage,
  type IngressError,
} from '../error-pages.js';
import { routingHost } from './http-forwarding.js';

/** The header that says the ingress itself answered, and why. */
export const POLICY_FAILED = { code: CODES.policyFailed, status: 500 };

/**
 * Write a policy's answer (custom-response, redirect, deny, …). Its headers may hold what a
 * template rendered from the request: one that cannot be written as it is (a CR, LF or other
 * control character) turns the answer into a 502 page, never into a second header or response.
 */
export function writeDecision(res: ServerResponse, d: RespondDecision): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const problem = headersProblem(d.headers);
  if (problem) {
    const req = res.req;
    sendErrorPage(
      req,
      res,
      INGRESS_ERRORS.unsafeResponseHead,
      routingHost(req.headers.host) ?? '',
      problem,
    );
    return;
  }
  if (d.status >= 300 && isGrpc(res.req.headers['content-type'])) {
    // A gRPC client reads a status, not a page: deny, basic-auth, jwt-validation, rate-limit…
    const message = d.refusal?.message ?? (d.body || reasonOf(d.status));
    const code: Record<string, string> = d.refusal ? { [ERROR_CODE_HEADER]: d.refusal.code } : {};
    writeGrpcStatus(res, d.status, message, { ...d.headers, ...code });
    return;
  }
  if (d.refusal && d.body === '') {
    // restrict-ips and a bare deny: the client is told why, with a code to look up.
    const page = refusalPage(d.refusal, d.status, res.req.headers.accept);
    res.writeHead(d.status, reasonOf(d.status), { ...d.headers, ...page.headers });
    res.end(res.req.method === 'HEAD' ? undefined : page.body);
    return;
  }
  res.writeHead(d.status, reasonOf(d.status), d.headers);
  res.end(d.body);
}

/** The reason phrase of `status`: a status line never reads `500 OK`. */
export function reasonOf(status: number): string {
  return STATUS_CODES[status] ?? 'Unknown';
}

/**
 * Why the request a policy let through cannot be written to the service, with the page to answer:
 * a rewritten target or an added header value with a control character, or a rewritten target
 * that breaks core/request-target.ts's rules. Otherwise its target, read as the edge reads one.
 */
export function rewrittenRequest(d: {
  rewrite?: string | undefined;
  headers: HeaderChanges;
}): { target: string | undefined } | { refused: IngressError; detail: string } {
  for (const [name, value] of d.headers.add) {
    const problem = fieldProblem(name, value);
    if (problem) return { refused: INGRESS_ERRORS.unsafeRequestHead, detail: problem };
  }
  if (d.rewrite === undefined) return { target: undefined };
  if (!isTargetText(d.rewrite)) {
    return {
      refused: INGRESS_ERRORS.unsafeRequestHead,
      detail: 'a space or control character in the rewritten request target',
    };
  }
  const read = normalizeOriginForm(d.rewrite);
  return 'problem' in read
    ? { refused: INGRESS_ERRORS.badRequestTarget, detail: `url-rewrite made ${read.problem}` }
    : { target: read.target };
}

const POLICY_FAILED_TEXT = `500 Internal Server Error\n\nThe endpoint's traffic policy could not run.\n\n${POLICY_FAILED.code}\n`;

/**
 * {@link writeFailure} as bytes, for the lean relay (the connection closes after it).
 * @example socket.end(rawPolicyFailure());
 */
export function rawPolicyFailure(): string {
  return (
    `HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Burrow-Error-Code: ${POLICY_FAILED.code}\r\n` +
    `Content-Length: ${Buffer.byteLength(POLICY_FAILED_TEXT)}\r\nConnection: close\r\n\r\n` +
    POLICY_FAILED_TEXT
  );
}

/** A policy that cannot run fails closed, with an answer that says so. */
export function writeFailure(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(POLICY_FAILED.status, reasonOf(POLICY_FAILED.status), {
    'content-type': 'text/plain; charset=utf-8',
    'burrow-error-code': POLICY_FAILED.code,
  });
  res.end(POLICY_FAILED_TEXT);
}

/**
 * An answer written straight onto a socket (upgrades have no ServerResponse); as writeDecision,
 * headers that cannot be written make it the 502 page.
 */
export function rawResponse(
  req: IncomingMessage,
  status: number,
  headers: Readonly<Record<string, string>>,
  body: string,
  refusal?: Refusal,
): string {
  const problem = headersProblem(headers);
  if (problem) {
    const host = routingHost(req.headers.host) ?? '';
    return rawErrorResponse(INGRESS_ERRORS.unsafeResponseHead, host, problem);
  }
  const answer = rawAnswer({ status, headers, body, refusal }, { close: true });
  return answer.head + answer.body;
}

/** A policy's answer as the lean relay writes it: the head (latin1) and the body (UTF-8). */
export interface RawAnswer {
  head: string;
  body: string;
  /** The headers as written, names and values alternating (for the inspector). */
  raw: string[];
}

/**
 * A policy's answer (`d`, whose headers passed headersProblem) as HTTP/1.1 bytes: the refusal
 * page when it has no body of its own (its variant by `accept`), no body for a HEAD request,
 * `connection: close` when the connection ends after it.
 * @example const a = rawAnswer(decision, { close: false, accept: 'text/html' }); socket.write(a.head, 'latin1'); socket.write(a.body);
 */
export function rawAnswer(
  d: Pick<RespondDecision, 'status' | 'headers' | 'body' | 'refusal'>,
  options: { close: boolean; accept?: string | undefined; method?: string },
): RawAnswer {
  let { headers, body } = d;
  if (d.refusal && body === '') {
    const page = refusalPage(d.refusal, d.status, options.accept);
    headers = { ...headers, ...page.headers };
    body = page.body;
  }
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
  return { head: head + '\r\n', body: options.method === 'HEAD' ? '' : body, raw };
}
