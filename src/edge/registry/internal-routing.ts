/**
 * forward-internal on the edge: which internal endpoint a URL names, and the per-request chain
 * of endpoints a request went through, so a loop (a → b → a) or a chain over the hop limit is
 * answered with an error instead of spinning. The hop is in-process: no network, no new socket.
 */
import { internalTarget } from '../../policy/actions/forward-internal.js';
import { INTERNAL_SUFFIX, type OnlineTunnel, type TunnelRegistry } from './tunnel-registry.js';

/** The most endpoints one request or connection may pass through by forward-internal. */
export const MAX_FORWARD_HOPS = 8;

/** Why a forward-internal could not be followed. */
export type ForwardRefusal =
  | { kind: 'loop'; chain: string[] }
  | { kind: 'hops'; chain: string[] }
  | { kind: 'offline'; key: string }
  | { kind: 'invalid'; url: string };

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
 * internal endpoint that takes it (a pool member, round robin), or why not.
 * @example const next = resolveInternal(registry, 'https://api.internal', [], tunnel);
 */
export function resolveInternal(
  registry: Pick<TunnelRegistry, 'internal'>,
  url: string,
  chain: readonly string[],
  from: OnlineTunnel,
): { next: OnlineTunnel; chain: string[] } | ForwardRefusal {
  const target = internalTarget(url);
  const walked = [...chain, chainName(from)];
  if (!target || !target.host.endsWith(INTERNAL_SUFFIX)) return { kind: 'invalid', url };
  if (walked.includes(target.key)) return { kind: 'loop', chain: [...walked, target.key] };
  if (walked.length >= MAX_FORWARD_HOPS) return { kind: 'hops', chain: [...walked, target.key] };
  const next = registry.internal(target.key);
  if (!next) return { kind: 'offline', key: target.key };
  return { next, chain: walked };
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
  }
}
