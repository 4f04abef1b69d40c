import { randomInt } from 'node:crypto';
import { aclPermits, type AclRule } from '../../core/acl.js';
import { CODES } from '../../core/errors.js';
import { parseHostPort } from '../../core/host-port.js';
import { hostnameProblem, isAtOrUnder } from '../../core/hostname.js';
import { randomDnsLabel } from '../../core/ids.js';
import { quote, shorten } from '../../core/quote.js';
import { LABEL_LIMITS, labelProblem } from '../../core/labels.js';
import type { Bind } from '../../protocol/index.js';
import type { Repositories } from '../../store/index.js';
import { AgentError, refusals } from './agent-errors.js';
import { optionRules, type OptionRules } from './bind-option-rules.js';
import { checkBindOptions, isSet } from './bind-options.js';
import {
  bindPolicyText,
  compileBindPolicy,
  mergedPolicyText,
  type BindTrafficPolicy,
} from './bind-traffic-policy.js';
import type { BindGrant } from './session-resumption.js';
import {
  holderOf,
  INTERNAL_SUFFIX,
  type OnlineTunnel,
  type TunnelProto,
  type TunnelRegistry,
} from '../registry/tunnel-registry.js';

/** What the agent side of the edge needs to know about the server. */
export interface AgentEdgeSettings {
  /** Base domain of random names (`<10 chars>.<baseDomain>`); any name under it may be bound. */
  baseDomain: string;
  /** Host and port range of TCP endpoints. */
  tcpHost: string;
  tcpPorts: { first: number; last: number };
  /** Public ports of the HTTPS/TLS and HTTP ingress, for URLs (omitted when 443 / 80). */
  httpsPort: number;
  httpPort: number;
  /** Region reported to agents and shown by the API. Default `local`. */
  region?: string | undefined;
}

/**
 * The public URL of an endpoint, agent or cloud: http/https/tls by name (with the ingress port
 * unless it is the scheme's default), tcp by `<tcpHost>:<port>`.
 * @example publicEndpointUrl(settings, 'https', 'app.example.com') // 'https://app.example.com:8443'
 */
export function publicEndpointUrl(
  settings: Pick<AgentEdgeSettings, 'httpsPort' | 'httpPort' | 'tcpHost'>,
  proto: TunnelProto,
  where: string | number,
): string {
  const { httpsPort, httpPort, tcpHost } = settings;
  switch (proto) {
    case 'tcp':
      return `tcp://${tcpHost}:${where}`;
    case 'http':
      return `http://${where}${httpPort === 80 ? '' : `:${httpPort}`}`;
    case 'https':
      return `https://${where}${httpsPort === 443 ? '' : `:${httpsPort}`}`;
    case 'tls':
      return `tls://${where}${httpsPort === 443 ? '' : `:${httpsPort}`}`;
  }
}

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

/**
 * Opts.HostHeaderRewrite: on for http and https endpoints when set; refused when set on tcp or
 * tls ones, which carry no HTTP request to rewrite.
 * @example hostHeaderRewriteOf({ HostHeaderRewrite: true }, 'https') // true
 */
export function hostHeaderRewriteOf(opts: Bind['Opts'], proto: string): true | undefined {
  if (!isSet(opts?.HostHeaderRewrite)) return undefined;
  if (proto === 'http' || proto === 'https') return true;
  throw refusals.unsupportedOption(
    'Opts.HostHeaderRewrite',
    `${proto} endpoints carry no HTTP requests; the Host header is rewritten on http and https endpoints`,
  );
}

/**
 * Opts.ProxyProto as a version: unset (0, '', null) means none; 1 and 2 (SDKs send a number, some
 * configs a string) are PROXY protocol v1 and v2; anything else is refused.
 * @example proxyProtoOf({ ProxyProto: 2 }) // 2
 */
export function proxyProtoOf(opts: Bind['Opts']): 1 | 2 | undefined {
  const value: unknown = opts?.ProxyProto;
  if (value === undefined || value === null || value === 0 || value === '' || value === '0') {
    return undefined;
  }
  if (value === 1 || value === '1') return 1;
  if (value === 2 || value === '2') return 2;
  throw refusals.unsupportedOption(
    `Opts.ProxyProto ${shorten(JSON.stringify(value))}`,
    'the PROXY protocol version is 1 or 2',
  );
}

const PROTOS: ReadonlySet<string> = new Set(['http', 'https', 'tcp', 'tls']);
/** Random-name attempts before giving up; with 36^10 names a second one is already unlikely. */
const RANDOM_NAME_ATTEMPTS = 8;

/** TCP addresses as reserved and ACL rules name them: port 1..65535, IPv6 kept in brackets. */
const ADDR = { minPort: 1, keepBrackets: true } as const;

/** `scheme://host[:port][/path]` or a bare `host[:port]`, as Go v2 sends in Opts.URL. */
function parseUrl(raw: string): { scheme: string | undefined; hostport: string } {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)/i.exec(raw.trim());
  if (m) return { scheme: m[1]!.toLowerCase(), hostport: m[2]! };
  return { scheme: undefined, hostport: raw.trim().replace(/[/?#].*$/, '') };
}

/** Lowercase without a trailing root dot. */
function normalizeName(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * Checks and allocates binds (docs/agents.md, "What an agent may bind"): the credential ACL
 * must permit the name, address or labels, and the name must be owned — reserved, covered by a
 * reserved wildcard (a wildcard itself only by its exact reservation), or under the base domain;
 * a TCP address must be reserved, or is a random free port. Names and addresses of edges are
 * refused, and so is one already online unless `mayReplace` says the holder is this agent's.
 *
 * @example
 * const plan = await policy.plan(bind, { credentialId, acl }, grant, (holder) => holder.sessionId === resumedFrom);
 * plan.url // 'https://k3j9x0a1b2.burrow.localhost:8443'
 */
export class BindPolicy {
  constructor(
    private readonly repos: Repositories,
    private readonly registry: TunnelRegistry,
    readonly settings: AgentEdgeSettings,
  ) {}

  /**
   * Check `bind` for `binder` and decide where it is served. `grant` (a verified bind token)
   * restores the name or port an earlier bind with the same id was given.
   */
  async plan(
    bind: Bind,
    binder: Binder,
    grant: BindGrant | undefined,
    mayReplace: (holder: OnlineTunnel) => boolean,
  ): Promise<BindPlan> {
    const proto = typeof bind.Proto === 'string' ? bind.Proto.toLowerCase() : '';
    if (!PROTOS.has(proto)) {
      throw refusals.badRequest(
        `Proto ${shorten(JSON.stringify(bind.Proto ?? null))} is not one of http, https, tcp, tls`,
      );
    }
    checkBindOptions(bind.Opts, bind.Extra, proto);
    const proxyProto = proxyProtoOf(bind.Opts);
    const hostHeaderRewrite = hostHeaderRewriteOf(bind.Opts, proto);
    const given = bindPolicyText(bind.Opts);
    const options = optionRules(bind.Opts, bind.Extra, proto as TunnelProto);
    const trafficPolicy =
      given || options
        ? await this.checkTrafficPolicy(
            given?.text ?? '',
            proto as TunnelProto,
            given?.field ?? 'TrafficPolicy',
            options,
          )
        : undefined;
    const pooling = bind.Extra?.PoolingEnabled === true;
    const extras = {
      pooling,
      ...(proxyProto ? { proxyProto } : {}),
      ...(hostHeaderRewrite ? { hostHeaderRewrite } : {}),
    };
    const poolable = (holder: OnlineTunnel): boolean =>
      mayReplace(holder) ||
      (pooling && this.registry.poolOf(holder).every((m) => m.pooling === true));
    const internal = this.internalPlan(bind, proto as TunnelProto, binder, poolable);
    if (internal) return { ...internal, ...extras, ...(trafficPolicy ? { trafficPolicy } : {}) };
    const restored = grant && grant.random && grant.proto === proto ? grant : undefined;
    const plan =
      proto === 'tcp'
        ? await this.planTcp(this.requestedAddr(bind), binder, restored, poolable)
        : await this.planName(
            proto as TunnelProto,
            this.requestedName(bind),
            binder,
            restored,
            poolable,
          );
    const pooled = { ...plan, ...extras };
    return trafficPolicy ? { ...pooled, trafficPolicy } : pooled;
  }

  /**
   * An internal endpoint's plan (binding `internal`, or a name ending `.internal`), or undefined
   * for a public bind. Internal names need no reservation (nobody outside reaches them) but the
   * ACL still applies; one outside `.internal` is refused.
   */
  private internalPlan(
    bind: Bind,
    proto: TunnelProto,
    binder: Binder,
    poolable: (holder: OnlineTunnel) => boolean,
  ): BindPlan | undefined {
    const bindings = bind.Extra?.Bindings ?? [];
    const asked = bindings.some((b) => typeof b === 'string' && b.toLowerCase() === 'internal');
    const requested = proto === 'tcp' ? this.requestedAddr(bind) : this.requestedName(bind);
    const raw = requested === undefined ? '' : normalizeName(requested);
    const host = proto === 'tcp' ? (parseHostPort(raw, ADDR)?.host ?? raw) : raw;
    const isInternal = host.endsWith(INTERNAL_SUFFIX);
    if (!asked && !isInternal) return undefined;
    if (!isInternal) throw refusals.internalName(requested ?? '(a random name)');
    const label = host.slice(0, -INTERNAL_SUFFIX.length);
    if (label === '' || hostnameProblem(`${label}.example`, false)) {
      throw refusals.badRequest(
        `${quote(requested ?? '')} is not a valid internal name; use a DNS name ending in .internal, like api.internal`,
      );
    }
    if (proto === 'tcp' && !parseHostPort(raw, ADDR)) {
      throw refusals.badRequest(
        `the internal TCP address ${quote(requested ?? '')} must have the form name.internal:port`,
      );
    }
    if (!aclPermits(binder.acl, { kind: 'domain', name: host })) throw refusals.aclName(host);
    const holder = this.registry.holder({ internal: raw });
    if (holder && !poolable(holder)) throw refusals.alreadyOnline(raw, holderOf(holder));
    const url = proto === 'tcp' ? `tcp://${raw}` : `${proto}://${raw}`;
    return { proto, url, internal: raw, random: false };
  }

  /**
   * Check a bind's (or PatchTunnelState's) policy text for an endpoint of `proto` like the API
   * checks edges' policies, and that the IP policies it names exist; throws the refusal. With
   * `options` (the rules of the bind's options), the policy that runs is those rules, then the
   * text's; `text` may then be '' (no policy of its own).
   * @example await policy.checkTrafficPolicy(text, 'https', 'TrafficPolicy')
   */
  async checkTrafficPolicy(
    text: string,
    proto: TunnelProto,
    field: string,
    options?: OptionRules,
  ): Promise<BindTrafficPolicy> {
    let checked: BindTrafficPolicy;
    if (!options) {
      checked = { text, policy: compileBindPolicy(text, proto, field) };
    } else {
      // Each part alone first, so that an error names the option, or the agent's own rule.
      compileBindPolicy(mergedPolicyText(options, undefined, proto), proto, 'Opts');
      if (text !== '') compileBindPolicy(text, proto, field);
      const merged = mergedPolicyText(options, text === '' ? undefined : text, proto);
      checked = { text, policy: compileBindPolicy(merged, proto, field), options };
    }
    const missing = await this.repos.ipPolicies.missing(checked.policy.ipPolicyIds);
    if (missing.length > 0) {
      throw new AgentError(
        CODES.policyActionValue,
        `The traffic policy is not valid: restrict-ips names IP policies that do not exist: ${missing.join(', ')}. Create them with POST /ip_policies, or remove them from ip_policies.`,
      );
    }
    return checked;
  }

  /**
   * Check a labeled tunnel's labels (at least one, each well-formed, each permitted by the ACL)
   * and return them as given.
   * @example policy.checkLabels({ edge: 'edghts_…' }, acl)
   */
  checkLabels(labels: unknown, acl: readonly AclRule[]): Record<string, string> {
    if (
      labels !== undefined &&
      labels !== null &&
      (typeof labels !== 'object' || Array.isArray(labels))
    ) {
      throw refusals.badRequest('Labels must be an object of string keys and values');
    }
    const entries = Object.entries((labels ?? {}) as Record<string, unknown>);
    if (entries.length === 0) throw refusals.noLabels();
    if (entries.length > LABEL_LIMITS.maxLabels) {
      throw refusals.badLabel(
        `at most ${LABEL_LIMITS.maxLabels} labels are allowed, got ${entries.length}`,
      );
    }
    const out: Record<string, string> = {};
    for (const [key, value] of entries) {
      if (typeof value !== 'string')
        throw refusals.badLabel(`the value of ${JSON.stringify(key)} must be a string`);
      const problem = labelProblem(key, value);
      if (problem) throw refusals.badLabel(problem.message);
      if (!aclPermits(acl, { kind: 'labels', labels: { [key]: value } })) {
        throw refusals.aclLabel(key, value);
      }
      out[key] = value;
    }
    return out;
  }

  /**
   * The public URL of a tunnel (see publicEndpointUrl).
   * @example policy.publicUrl('https', 'app.example.com') // 'https://app.example.com:8443'
   */
  publicUrl(proto: TunnelProto, where: string | number): string {
    return publicEndpointUrl(this.settings, proto, where);
  }

  /** A random name under the base domain that nobody holds. */
  randomName(): string {
    for (let i = 0; i < RANDOM_NAME_ATTEMPTS; i++) {
      const name = `${randomDnsLabel(10)}.${this.settings.baseDomain.toLowerCase()}`;
      if (!this.registry.holder({ hostname: name })) return name;
    }
    throw refusals.badRequest('no free random name could be found; try again');
  }

  // ---- names (http, https, tls) ------------------------------------------------------------

  private requestedName(bind: Bind): string | undefined {
    const opts = bind.Opts ?? {};
    const text = (v: unknown): string | undefined =>
      typeof v === 'string' && v.trim() !== '' ? v : undefined;
    const url = text(opts.URL);
    if (url) {
      const { hostport } = parseUrl(url);
      const hp = parseHostPort(hostport, ADDR);
      return hp ? hp.host : hostport || undefined;
    }
    const name = text(opts.Domain) ?? text(opts.Hostname);
    if (name) return name;
    const sub = text(opts.Subdomain);
    return sub ? `${sub}.${this.settings.baseDomain}` : undefined;
  }

  private async planName(
    proto: TunnelProto,
    requested: string | undefined,
    binder: Binder,
    restored: BindGrant | undefined,
    mayReplace: (holder: OnlineTunnel) => boolean,
  ): Promise<BindPlan> {
    if (requested === undefined) {
      const old = restored?.hostname;
      if (
        old &&
        this.free({ hostname: old }, mayReplace) &&
        (await this.nameAllowed(old, binder))
      ) {
        return this.namePlan(proto, old, undefined, true);
      }
      const name = this.randomName();
      if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name, true);
      return this.namePlan(proto, name, undefined, true);
    }
    const name = normalizeName(requested);
    const problem = hostnameProblem(name, true);
    if (problem) {
      throw refusals.badRequest(`${quote(requested)} is not a valid hostname (${problem})`);
    }
    if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name);
    const domainId = await this.ownership(name);
    const edge = await this.repos.edges.edgeForHostport([
      `${name}:${this.settings.httpsPort}`,
      `${name}:443`,
    ]);
    if (edge) throw refusals.usedByEdge(name, edge.edge_id);
    if (!this.free({ hostname: name }, mayReplace)) {
      const holder = this.registry.holder({ hostname: name });
      throw refusals.alreadyOnline(name, holder && holderOf(holder));
    }
    return this.namePlan(proto, name, domainId, false);
  }

  /** The reservation `name` stands on (undefined under the base domain), or the refusal. */
  private async ownership(name: string): Promise<string | undefined> {
    if (name.startsWith('*.')) {
      const exact = await this.repos.reservedDomains.findByDomain(name);
      if (!exact) throw refusals.wildcardNotExact(name);
      return exact.id;
    }
    const covering = await this.repos.reservedDomains.findCovering(name);
    if (covering) return covering.id;
    const base = this.settings.baseDomain.toLowerCase();
    if (name !== base && isAtOrUnder(name, base)) return undefined;
    throw refusals.nameNotReserved(name, base);
  }

  /** Whether a restored random name may still be used (ACL, ownership, no edge). */
  private async nameAllowed(name: string, binder: Binder): Promise<boolean> {
    if (!aclPermits(binder.acl, { kind: 'domain', name })) return false;
    try {
      await this.ownership(name);
    } catch {
      return false;
    }
    const edge = await this.repos.edges.edgeForHostport([`${name}:${this.settings.httpsPort}`]);
    return edge === undefined;
  }

  private namePlan(
    proto: TunnelProto,
    hostname: string,
    domainId: string | undefined,
    random: boolean,
  ): BindPlan {
    return { proto, hostname, url: this.publicUrl(proto, hostname), domainId, random };
  }

  // ---- addresses (tcp) ---------------------------------------------------------------------

  private requestedAddr(bind: Bind): string | undefined {
    const opts = bind.Opts ?? {};
    const url = typeof opts.URL === 'string' ? opts.URL.trim() : '';
    if (url) return parseUrl(url).hostport || undefined;
    return typeof opts.Addr === 'string' && opts.Addr.trim() !== '' ? opts.Addr.trim() : undefined;
  }

  private async planTcp(
    requested: string | undefined,
    binder: Binder,
    restored: BindGrant | undefined,
    mayReplace: (holder: OnlineTunnel) => boolean,
  ): Promise<BindPlan> {
    if (requested === undefined) {
      if (!aclPermits(binder.acl, { kind: 'random-addr' })) throw refusals.aclRandomAddr();
      const port = await this.randomPort(restored?.port, mayReplace);
      return { proto: 'tcp', port, url: this.publicUrl('tcp', port), random: true };
    }
    const hp = parseHostPort(requested, ADDR);
    if (!hp) {
      throw refusals.badRequest(
        `the TCP address ${quote(requested)} must have the form host:port, e.g. '${this.settings.tcpHost}:${this.settings.tcpPorts.first}'`,
      );
    }
    const addr = `${hp.host.toLowerCase()}:${hp.port}`;
    if (!aclPermits(binder.acl, { kind: 'addr', host: hp.host, port: hp.port })) {
      throw refusals.aclAddr(addr);
    }
    const reserved =
      hp.host.toLowerCase() === this.settings.tcpHost.toLowerCase()
        ? await this.repos.reservedAddrs.findByAddr(addr)
        : undefined;
    if (!reserved) throw refusals.addrNotReserved(addr);
    const edge = await this.repos.edges.edgeForHostport([addr]);
    if (edge) throw refusals.usedByEdge(addr, edge.edge_id);
    if (!this.free({ port: hp.port }, mayReplace)) {
      const holder = this.registry.holder({ port: hp.port });
      throw refusals.alreadyOnline(addr, holder && holderOf(holder));
    }
    return {
      proto: 'tcp',
      port: hp.port,
      url: this.publicUrl('tcp', hp.port),
      addrId: reserved.id,
      random: false,
    };
  }

  /** A port of the range that is neither reserved nor online; `preferred` first when it is. */
  private async randomPort(
    preferred: number | undefined,
    mayReplace: (holder: OnlineTunnel) => boolean,
  ): Promise<number> {
    const { first, last } = this.settings.tcpPorts;
    const reserved = await this.reservedPorts();
    const usable = (port: number): boolean =>
      port >= first && port <= last && !reserved.has(port) && this.free({ port }, mayReplace);
    if (preferred !== undefined && usable(preferred)) return preferred;
    const size = last - first + 1;
    const start = randomInt(size);
    for (let i = 0; i < size; i++) {
      const port = first + ((start + i) % size);
      if (!reserved.has(port) && !this.registry.holder({ port })) return port;
    }
    throw refusals.noFreePort(`${first}-${last}`);
  }

  private async reservedPorts(): Promise<Set<number>> {
    const ports = new Set<number>();
    let beforeId: string | undefined;
    for (;;) {
      const page = await this.repos.reservedAddrs.list({ beforeId, limit: 100 });
      for (const { addr } of page.items) {
        const hp = parseHostPort(addr, ADDR);
        if (hp) ports.add(hp.port);
      }
      if (page.nextBeforeId === undefined) return ports;
      beforeId = page.nextBeforeId;
    }
  }

  private free(
    where: { hostname?: string; port?: number },
    mayReplace: (holder: OnlineTunnel) => boolean,
  ): boolean {
    const holder = this.registry.holder(where);
    return holder === undefined || mayReplace(holder);
  }
}
