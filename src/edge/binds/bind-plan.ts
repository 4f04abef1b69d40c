/**
 * What planning a bind works with: who binds (Binder), the plan it ends in (BindPlan), what the
 * planners read (BindPlanContext: the store, what is online, the server's settings; BindPlanCall:
 * that, and one bind's binder, mayReplace and restored grant), the holder in a bind's way, and the
 * name or TCP address a bind asks for, read from its options as the SDKs send them. The planners
 * are bind-plan-internal.ts (`.internal` names), bind-plan-names.ts (http, https, tls) and
 * bind-plan-tcp.ts; bind-policy.ts chooses between them.
 */
import type { AclRule } from '../../core/acl.js';
import { parseHostPort } from '../../core/host-port.js';
import type { Bind } from '../../protocol/index.js';
import type { Repositories } from '../../store/index.js';
import type { OnlineTunnel, TunnelProto, TunnelRegistry } from '../registry/tunnel-registry.js';
import type { AgentEdgeSettings } from './agent-edge-settings.js';
import type { BindTrafficPolicy } from './bind-traffic-policy.js';
import type { BindGrant } from './session-resumption.js';

/** Who binds: the session's credential and its parsed ACL. */
export interface Binder {
  credentialId: string;
  acl: readonly AclRule[];
}

/** Where and how a bind is served, once checked and allocated. */
export interface BindPlan {
  proto: TunnelProto;
  hostname?: string | undefined;
  port?: number | undefined;
  url: string;
  domainId?: string | undefined;
  addrId?: string | undefined;
  /** Nothing particular was asked for: another name or port may replace this one on conflict. */
  random: boolean;
  /** The bind's traffic policy (TrafficPolicy or Policy), validated for `proto`. */
  trafficPolicy?: BindTrafficPolicy | undefined;
  /** Internal endpoints: `name.internal` or `name.internal:port` (see OnlineTunnel.internal). */
  internal?: string | undefined;
  /** Extra.PoolingEnabled: share the URL with other pooling endpoints. */
  pooling?: boolean | undefined;
  /** Opts.ProxyProto: the PROXY protocol version each stream to the agent starts with. */
  proxyProto?: 1 | 2 | undefined;
  /** Opts.HostHeaderRewrite: the agent gets `Host: <ForwardsTo's host:port>` (http, https). */
  hostHeaderRewrite?: true | undefined;
}

/** What the planners read: reservations and edges in the store, what is online, the settings. */
export interface BindPlanContext {
  repos: Repositories;
  registry: TunnelRegistry;
  settings: AgentEdgeSettings;
}

/** Whether the holder of a name or port may give it up to this bind (or share it, in a pool). */
export type MayReplace = (holder: OnlineTunnel) => boolean;

/** One bind being planned: the context, who binds, and whose hold on a name or port gives way. */
export interface BindPlanCall extends BindPlanContext {
  binder: Binder;
  mayReplace: MayReplace;
  /** The random name or port an earlier bind had: a verified bind token's, of the same proto. */
  restored?: BindGrant | undefined;
}

/**
 * Who holds `where` and may not be replaced: undefined when `where` is free for this bind (nobody
 * holds it, or `mayReplace` lets its holder go).
 * @example holderInTheWay(registry, { hostname: 'app.example.com' }, () => false)?.sessionId
 */
export function holderInTheWay(
  registry: TunnelRegistry,
  where: { hostname?: string; port?: number; internal?: string },
  mayReplace: MayReplace,
): OnlineTunnel | undefined {
  const holder = registry.holder(where);
  return holder !== undefined && !mayReplace(holder) ? holder : undefined;
}

/**
 * TCP addresses as reservations, ACL rules and cloud endpoint URLs name them: port 1..65535, IPv6
 * kept in brackets.
 */
export const BIND_ADDR = { minPort: 1, keepBrackets: true } as const;

/** The host[:port] of `scheme://host[:port][/path]` or of a bare `host[:port]` (Go v2's Opts.URL). */
function hostportOfUrl(raw: string): string {
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(raw.trim());
  return m ? m[1]! : raw.trim().replace(/[/?#].*$/, '');
}

/**
 * The name an http, https or tls bind asks for (Opts.URL's host, Domain, Hostname, or Subdomain
 * under the base domain), as given; undefined when it asks for none.
 * @example requestedName({ Opts: { Subdomain: 'app' } }, 'burrow.localhost') // 'app.burrow.localhost'
 */
export function requestedName(bind: Bind, baseDomain: string): string | undefined {
  const opts = bind.Opts ?? {};
  const text = (v: unknown): string | undefined =>
    typeof v === 'string' && v.trim() !== '' ? v : undefined;
  const url = text(opts.URL);
  if (url) {
    const hostport = hostportOfUrl(url);
    const hp = parseHostPort(hostport, BIND_ADDR);
    return hp ? hp.host : hostport || undefined;
  }
  const name = text(opts.Domain) ?? text(opts.Hostname);
  if (name) return name;
  const sub = text(opts.Subdomain);
  return sub ? `${sub}.${baseDomain}` : undefined;
}

/**
 * The address a tcp bind asks for (Opts.URL's host:port, or Addr), as given; undefined when it
 * asks for none.
 * @example requestedAddr({ Opts: { URL: 'tcp://localhost:20001' } }) // 'localhost:20001'
 */
export function requestedAddr(bind: Bind): string | undefined {
  const opts = bind.Opts ?? {};
  const url = typeof opts.URL === 'string' ? opts.URL.trim() : '';
  if (url) return hostportOfUrl(url) || undefined;
  return typeof opts.Addr === 'string' && opts.Addr.trim() !== '' ? opts.Addr.trim() : undefined;
}
