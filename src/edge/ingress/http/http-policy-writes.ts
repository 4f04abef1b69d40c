/**
 * What the ingress writes for a traffic policy, apart from the request it forwards: the page of a
 * policy that failed, and the check of what the policy made of the request (a rewritten target,
 * added headers) before it is written. A template may render client input into any of these, so
 * each is checked before it is written: a control character is refused, never written. (The
 * policy's own answers are checked where the relay takes them, http-policy-lean.ts and
 * lean-response-phase.ts.)
 */
import { CODES } from '../../../core/errors.js';
import { fieldProblem, isTargetText } from '../../../core/http-wire.js';
import { normalizeOriginForm } from '../../../core/request-target.js';
import type { HeaderChanges } from '../../../policy/index.js';
import { INGRESS_ERRORS, rawAnswer, rawText, type IngressError } from '../error-pages.js';

/** The header that says the ingress itself answered, and why. */
export const POLICY_FAILED = { code: CODES.policyFailed, status: 500 };

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
