/**
 * forward-internal on the HTTP ingress: the request (or upgrade) a policy handed to an internal
 * endpoint goes on, in this process, as that policy left it (headers, target, a body read whole);
 * a loop, a chain over the hop limit or an offline target is answered with its error page at once.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { INGRESS_ERRORS, sendErrorPage, type IngressError } from '../error-pages.js';
import type { HttpPolicyFlow } from './http-policy.js';
import {
  followInternal,
  refusalText,
  type ForwardRefusal,
} from '../../registry/internal-routing.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';

/** Bodies read whole by the policy of an endpoint a request was forwarded from. */
const carriedBodies = new WeakMap<IncomingMessage, Buffer>();

/**
 * The body an earlier endpoint's policy read whole, to send upstream instead of the spent stream.
 * @example const body = flow?.body ?? carriedBody(req);
 */
export function carriedBody(req: IncomingMessage): Buffer | undefined {
  return carriedBodies.get(req);
}

/**
 * Hand the full path a body the relay's policy run read whole (an HTTP/2 request's): it is sent
 * upstream in place of the spent stream, as a forwarding endpoint's is.
 * @example if (held.body) carryBody(req, held.body);
 */
export function carryBody(req: object, body: Buffer): void {
  carriedBodies.set(req as IncomingMessage, body);
}

/** `req.headers` for a changed raw header list (names lowercased; repeated values joined). */
export function headersOf(raw: string[]): IncomingMessage['headers'] {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    const prev = out[name];
    if (prev === undefined) out[name] = name === 'set-cookie' ? [value] : value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[name] = `${prev}, ${value}`;
  }
  return out;
}

/** A forward-internal that cannot be followed: the error page and its text. */
export interface ForwardRefused {
  refused: IngressError;
  detail: string;
}

/**
 * Where `flow.forwardInternal` from `tunnel` leads, for requests and upgrades alike: the internal
 * endpoint to serve the request next (a pool member; the request already changed as the policy
 * left it), why it cannot be followed (a loop, over the hop limit, offline with `on_error: halt`,
 * not an HTTP endpoint), or undefined when there is no forward or `on_error: continue` lets
 * `tunnel` itself go on.
 * @example const step = forwardStep(registry, req, tunnel, [], flow);
 */
export function forwardStep(
  registry: Pick<TunnelRegistry, 'internal'>,
  req: IncomingMessage,
  tunnel: OnlineTunnel,
  chain: readonly string[],
  flow: HttpPolicyFlow,
): { next: OnlineTunnel; chain: string[] } | ForwardRefused | undefined {
  const forward = flow.forwardInternal;
  if (!forward) return undefined;
  const step = followInternal(registry, forward, chain, tunnel, ['http', 'https']);
  if (step === undefined) return undefined;
  if ('next' in step) {
    const raw = flow.requestHeaders(req.rawHeaders);
    req.rawHeaders = raw;
    req.headers = headersOf(raw);
    if (flow.body) carriedBodies.set(req, flow.body);
    return step;
  }
  return forwardRefused(step.refusal);
}

/**
 * The error page of a forward-internal that cannot be followed, on every HTTP path.
 * @example forwardRefused({ kind: 'offline', key: 'api.internal' }).refused // internalOffline
 */
export function forwardRefused(refusal: ForwardRefusal): ForwardRefused {
  const refused =
    refusal.kind === 'loop' || refusal.kind === 'hops'
      ? INGRESS_ERRORS.forwardLoop
      : INGRESS_ERRORS.internalOffline;
  return { refused, detail: refusalText(refusal) };
}

/**
 * Follow `flow.forwardInternal` from `tunnel` for a plain request: the internal endpoint to serve
 * it next, `'answered'` after an error page, or undefined when `tunnel` itself goes on.
 * @example const next = followForward(registry, req, res, tunnel, [], flow);
 */
export function followForward(
  registry: Pick<TunnelRegistry, 'internal'>,
  req: IncomingMessage,
  res: ServerResponse,
  tunnel: OnlineTunnel,
  chain: readonly string[],
  flow: HttpPolicyFlow,
): { next: OnlineTunnel; chain: string[] } | 'answered' | undefined {
  const step = forwardStep(registry, req, tunnel, chain, flow);
  if (!step || !('refused' in step)) return step;
  if (!req.complete) req.resume();
  sendErrorPage(req, res, step.refused, req.headers.host ?? '', step.detail);
  return 'answered';
}
