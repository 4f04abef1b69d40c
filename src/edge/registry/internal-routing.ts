/**
 * forward-internal on the edge: which internal endpoint a URL names, and the per-request chain
 * of endpoints a request went through, so a loop (a → b → a) or a chain over the hop limit is
 * answered with an error instead of spinning. The hop is in-process: no network, no new socket.
 */
import { internalTarget } from '../../policy/actions/forward-internal.js';
import type { ForwardInternal } from '../../policy/index.js';
import { INTERNAL_SUFFIX, type OnlineTunnel, type TunnelRegistry } from './tunnel-registry.js';

/** The most endpoints one request or connection may pass through by forward-internal. */
export const MAX_FORWARD_HOPS = 8;

/** Why a forward-internal could not be followed. */
export type ForwardRefusal =
  | { kind: 'loop'; chain: string[] }
  | { kind: 'hops'; chain: string[] }
  | { kind: 'offline'; key: string }
  | { kind: 'invalid'; url: string }
  /** The target serves another protocol than the connection or request that was forwarded. */
  | { kind: 'protocol'; name: string; proto: string; wanted: string };

/**
 * The name an endpoint goes by in a forward chain.
 * @example chainName(tunnel) // 'api.internal'
 */
export function chainName(tunnel: OnlineTunnel): string {
  return (
    tunnel.internal ??
    tunnel.hostname ??
    (tunnel.port !== undefined ? `:${tunnel.port}` : tunnel.id)
  );
}

/**
 * Resolve a forward-internal from `from` (reached through `chain`, the names before it) to the
 * internal endpoint that takes it (a pool member, round robin), or why not. `target` is `url`
 * parsed, when the policy action already parsed it (ForwardInternal.target).
 * @example const next = resolveInternal(registry, 'https://api.internal', [], tunnel);
 */
export function resolveInternal(
  registry: Pick<TunnelRegistry, 'internal'>,
  url: string,
  chain: readonly string[],
  from: OnlineTunnel,
  target = internalTarget(url),
): { next: OnlineTunnel; chain: string[] } | ForwardRefusal {
  const walked = [...chain, chainName(from)];
  if (!target || !target.host.endsWith(INTERNAL_SUFFIX)) return { kind: 'invalid', url };
  if (walked.includes(target.key)) return { kind: 'loop', chain: [...walked, target.key] };
  if (walked.length >= MAX_FORWARD_HOPS) return { kind: 'hops', chain: [...walked, target.key] };
  const next = registry.internal(target.key);
  if (!next) return { kind: 'offline', key: target.key };
  return { next, chain: walked };
}

/**
 * Where a forward-internal from `from` leads, for a listener that carries connections or
 * requests of the protocols `wanted` names (`http` and `https` for the HTTP ingress, `tcp`, `tls`):
 * the next endpoint (a pool member) with the chain so far, why it cannot be followed, or
 * undefined when `from` itself goes on (an offline target with `on_error: continue`; never for a
 * cloud endpoint, which has nothing of its own to fall back to).
 * @example const step = followInternal(registry, forward, chain, tunnel, ['tcp']);
 */
export function followInternal(
  registry: Pick<TunnelRegistry, 'internal'>,
  forward: ForwardInternal,
  chain: readonly string[],
  from: OnlineTunnel,
  wanted: readonly string[],
): { next: OnlineTunnel; chain: string[] } | { refusal: ForwardRefusal } | undefined {
  const resolved = resolveInternal(registry, forward.url, chain, from, forward.target);
  if ('next' in resolved) {
    const proto = resolved.next.proto ?? '';
    if (wanted.includes(proto)) return resolved;
    const name = chainName(resolved.next);
    const refusal: ForwardRefusal = { kind: 'protocol', name, proto, wanted: wanted[0]! };
    return { refusal };
  }
  if (resolved.kind === 'offline' && forward.onError === 'continue' && !from.cloud)
    return undefined;
  return { refusal: resolved };
}

/**
 * Whether an internal endpoint serves `url` now (forward-internal's `on_error: continue`).
 * @example internalOnline(registry, 'https://api.internal') // true
 */
export function internalOnline(registry: Pick<TunnelRegistry, 'holder'>, url: string): boolean {
  const target = internalTarget(url);
  return target !== undefined && registry.holder({ internal: target.key }) !== undefined;
}

/**
 * The text of a refusal, for error pages and logs.
 * @example refusalText({ kind: 'loop', chain: ['a.internal', 'b.internal', 'a.internal'] })
 */
export function refusalText(refusal: ForwardRefusal): string {
  switch (refusal.kind) {
    case 'loop':
      return `forward-internal loop: ${refusal.chain.join(' → ')}. Change the traffic policies so that no endpoint forwards back to one the request already went through.`;
    case 'hops':
      return `forward-internal went through ${MAX_FORWARD_HOPS} endpoints (${refusal.chain.join(' → ')}), the most one request may; shorten the chain.`;
    case 'offline':
      return `No internal endpoint is online for ${refusal.key}. Start the agent that binds it (binding internal), or check the forward-internal url.`;
    case 'invalid':
      return `forward-internal named '${refusal.url}', which is not an internal URL (https://name.internal, tcp://name.internal:port).`;
    case 'protocol':
      return `forward-internal named ${refusal.name}, a ${refusal.proto} endpoint; a ${refusal.wanted} connection goes only to a ${refusal.wanted} internal endpoint (https://name.internal for HTTP, tls://name.internal for TLS, tcp://name.internal:port for TCP).`;
  }
}
