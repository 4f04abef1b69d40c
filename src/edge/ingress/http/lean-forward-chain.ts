/**
 * A request's way through a forward-internal chain, on the relay: what the endpoints that
 * forwarded it keep for the rest of the exchange (http-policy-lean.ts `ForwarderRun`), joined with
 * what the endpoint that serves it applies, and the page of a hop that cannot be made.
 */
import { NO_HEADER_CHANGES, type BodyRewrite } from '../../../policy/index.js';
import { refusalText, type ForwardRefusal } from '../../registry/internal-routing.js';
import { INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import type { ForwarderRun, LeanPolicyRun, LeanVerdict } from './http-policy-lean.js';
import type { ResponsePhase } from './lean-response-phase.js';

/**
 * What the relay applies for an endpoint that serves a request itself after all: its `relay`
 * verdict's run, or, for a `forward` whose target went offline with `on_error: continue`, the
 * changes and the response phase the policy made before the hop.
 * @example const run = ownRun(verdict);
 */
export function ownRun(verdict: LeanVerdict): LeanPolicyRun | undefined {
  if (verdict.kind === 'relay') return verdict.run;
  if (verdict.kind !== 'forward' || (!verdict.changes && !verdict.forwarder)) return undefined;
  return {
    requestHeaders: verdict.changes?.headers ?? NO_HEADER_CHANGES,
    target: verdict.changes?.target,
    response: verdict.forwarder?.response,
    observers: verdict.forwarder?.observers,
    bodyRewrite: verdict.forwarder?.bodyRewrite,
  };
}

/**
 * `run` (the last endpoint's, or none) with what the endpoints that forwarded the request there
 * keep (`forwarders`, the first endpoint first): the request body goes through their rewrites
 * before its own, their response phases run after its own, the nearest first, and their
 * observers are told the status too.
 * @example const run = withForwarders(verdict.run, walk.forwarders);
 */
export function withForwarders(
  run: LeanPolicyRun | undefined,
  forwarders: readonly ForwarderRun[] | undefined,
): LeanPolicyRun | undefined {
  if (!forwarders?.length) return run;
  let outer: ResponsePhase | undefined;
  const observers = [...(run?.observers ?? [])];
  // The body goes through the rewrites in the order the endpoints saw the request: the first's first.
  const replacements: BodyRewrite['replacements'][number][] = [];
  for (const forwarder of forwarders) {
    if (forwarder.response) outer = { ...forwarder.response, next: outer };
    if (forwarder.observers) observers.push(...forwarder.observers);
    if (forwarder.bodyRewrite) replacements.push(...forwarder.bodyRewrite.replacements);
  }
  if (run?.bodyRewrite) replacements.push(...run.bodyRewrite.replacements);
  let response = run?.response;
  if (response && outer) response = { ...response, next: outer };
  return {
    requestHeaders: run?.requestHeaders ?? NO_HEADER_CHANGES,
    target: run?.target,
    response: response ?? outer,
    observers: observers.length > 0 ? observers : undefined,
    bodyRewrite: replacements.length > 0 ? { kind: 'body', replacements } : undefined,
  };
}

/**
 * The error page of a forward-internal that cannot be followed (a loop, a chain over the hop
 * limit, an offline target), with the detail that says which.
 * @example forwardRefused({ kind: 'offline', key: 'api.internal' }).refused // internalOffline
 */
export function forwardRefused(refusal: ForwardRefusal): { refused: IngressError; detail: string } {
  const refused =
    refusal.kind === 'loop' || refusal.kind === 'hops'
      ? INGRESS_ERRORS.forwardLoop
      : INGRESS_ERRORS.internalOffline;
  return { refused, detail: refusalText(refusal) };
}
