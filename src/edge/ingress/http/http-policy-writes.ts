/**
 * What the ingress writes for a traffic policy, apart from the request it forwards: its answers
 * (custom-response, redirect, deny, …) on a response or raw on an upgrade's socket, the page of a
 * policy that failed, and the check of what the policy made of the request (a rewritten target,
 * added headers) before it is written. A template may render client input into any of these, so
 * each is checked where it is written: a control character is refused, never written.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CODES } from '../../../core/errors.js';
import { fieldProblem, headersProblem, isTargetText } from '../../../core/http-wire.js';
import { normalizeOriginForm } from '../../../core/request-target.js';
import type { HeaderChanges, Refusal, RespondDecision } from '../../../policy/index.js';
import { isGrpc, writeGrpcStatus } from '../grpc-answers.js';
import {
  ERROR_CODE_HEADER,
  INGRESS_ERRORS,
  rawAnswer,
  rawErrorResponse,
  rawText,
  reasonOf,
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

/** The answer of a policy that could not run (every wire writes this one). */
export const POLICY_FAILED_ANSWER = {
  status: POLICY_FAILED.status,
  headers: { 'content-type': 'text/plain; charset=utf-8', 'burrow-error-code': POLICY_FAILED.code },
  body: `500 Internal Server Error\n\nThe endpoint's traffic policy could not run.\n\n${POLICY_FAILED.code}\n`,
};

/**
 * {@link writeFailure} as bytes, for the lean relay (the connection closes after it).
 * @example socket.end(rawPolicyFailure());
 */
export function rawPolicyFailure(): string {
  return rawText(rawAnswer(POLICY_FAILED_ANSWER, { close: true }));
}

/** A policy that cannot run fails closed, with an answer that says so. */
export function writeFailure(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(POLICY_FAILED.status, reasonOf(POLICY_FAILED.status), POLICY_FAILED_ANSWER.headers);
  res.end(POLICY_FAILED_ANSWER.body);
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
  return rawText(rawAnswer({ status, headers, body, refusal }, { close: true }));
}
