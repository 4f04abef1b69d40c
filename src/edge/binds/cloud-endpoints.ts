/**
 * Cloud endpoints on live traffic: every endpoint stored with `POST /endpoints` is a tunnel in
 * the registry with no agent behind it (`cloud: true`), so the ingress routes to it like to any
 * endpoint and runs its traffic policy; what the policy neither answers nor forwards gets an
 * error page (http-ingress.ts). Kept in sync with the store like edges' routes (StoreFollower): a
 * change event (this process's `changes`, another node's notice) reloads the endpoint it names,
 * and the slow reconcile reloads them all.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from '../../core/logger.js';
import type { PolicyEventLog, SecretsLookup } from '../../policy/index.js';
import type { CloudEndpoint, Repositories } from '../../store/index.js';
import { compileBindPolicy } from './bind-traffic-policy.js';
import { StoreRouteSource } from './store-routes.js';
import { parseCloudEndpointUrl } from './cloud-endpoint-url.js';
import { endpointInputOf } from './endpoint-policy.js';
import { internalOnline } from '../registry/internal-routing.js';
import type {
  OnlineTunnel,
  ProxyInfo,
  TunnelPolicy,
  TunnelProto,
  TunnelRegistry,
} from '../registry/tunnel-registry.js';

export interface CloudEndpointsOptions {
  repos: Pick<Repositories, 'cloudEndpoints' | 'ipPolicies'>;
  registry: TunnelRegistry;
  policyEvents?: PolicyEventLog | undefined;
  /** What policies' `secrets.get` reads (the edge's SecretsResolver). */
  secrets?: SecretsLookup | undefined;
  /** Builds public URLs the way agents' endpoints get them (ingress ports). */
  publicUrl: (proto: TunnelProto, where: string | number) => string;
  logger?: Logger | undefined;
  /** The full reconcile's period (ms; 0: none). Default STORE_RECONCILE_MS. */
  syncIntervalMs?: number | undefined;
}

/** A cloud endpoint as the registry holds it. */
class CloudTunnel implements OnlineTunnel {
  readonly sessionId = '';
  readonly forwardsTo = '';
  readonly cloud = true;
  readonly bindId: string;
  readonly proto: TunnelProto;
  readonly hostname: string | undefined;
  readonly port: number | undefined;
  readonly internal: string | undefined;
  readonly pooling: boolean;
  readonly startedAt: string;
  readonly metadata: string;
  readonly trafficPolicy: string;
  policy: TunnelPolicy | undefined;

  constructor(
    readonly id: string,
    readonly url: string,
    readonly stored: CloudEndpoint,
    where: Pick<OnlineTunnel, 'hostname' | 'port' | 'internal'> & { proto: TunnelProto },
  ) {
    this.bindId = id;
    this.proto = where.proto;
    this.hostname = where.hostname;
    this.port = where.port;
    this.internal = where.internal;
    this.pooling = stored.pooling_enabled;
    this.startedAt = stored.created_at;
    this.metadata = stored.metadata;
    this.trafficPolicy = stored.traffic_policy;
  }

  /** Nothing is behind a cloud endpoint: what its policy does not handle is refused. */
  connect(_info: ProxyInfo): Promise<Duplex> {
    return Promise.reject(
      new Error('a cloud endpoint has no agent; its traffic policy did not handle this'),
    );
  }
}

/**
 * @example
 * const cloud = new CloudEndpoints({ repos, registry, publicUrl });
 * await cloud.start();
 */
export class CloudEndpoints extends StoreRouteSource<CloudEndpoint> {
  private readonly live = new Map<string, CloudTunnel>();

  constructor(private readonly options: CloudEndpointsOptions) {
    super(options.repos.cloudEndpoints.changes, options.registry, options.syncIntervalMs);
  }

  /** Reload only these endpoints (a change event named them). */
  protected async reloadIds(ids: string[]): Promise<void> {
    try {
      const stored = await Promise.all(ids.map((id) => this.options.repos.cloudEndpoints.get(id)));
      if (this.closed) return;
      ids.forEach((id, i) => this.update(id, stored[i]));
    } catch (err) {
      this.options.logger?.warn({ err }, 'cloud endpoints could not be reloaded');
    }
  }

  /** Bring one endpoint to what is stored (undefined: deleted). */
  private update(id: string, ep: CloudEndpoint | undefined): void {
    const current = this.live.get(id);
    if (!ep) {
      this.blocked.delete(id);
      if (!current) return;
      this.live.delete(id);
      this.options.registry.removeTunnel(current.id);
      return;
    }
    // updated_at has one-second resolution: compare what serving depends on instead.
    if (current && JSON.stringify(current.stored) === JSON.stringify(ep)) return;
    this.install(ep, current);
  }

  /** An endpoint whose URL an agent held: a tunnel left, it may be served now. */
  protected retry(ep: CloudEndpoint): void {
    this.install(ep, undefined);
  }

  protected removeAll(): void {
    for (const tunnel of this.live.values()) this.options.registry.removeTunnel(tunnel.id);
    this.live.clear();
  }

  protected async reload(): Promise<void> {
    try {
      await this.load();
    } catch (err) {
      this.options.logger?.warn({ err }, 'cloud endpoints could not be reloaded');
    }
  }

  private async load(): Promise<void> {
    const stored = await this.options.repos.cloudEndpoints.all();
    if (this.closed) return;
    const seen = new Set<string>();
    for (const ep of stored) {
      seen.add(ep.id);
      this.update(ep.id, ep);
    }
    for (const id of [...this.live.keys(), ...this.blocked.keys()]) {
      if (!seen.has(id)) this.update(id, undefined);
    }
  }

  private install(ep: CloudEndpoint, current: CloudTunnel | undefined): void {
    const { registry, logger } = this.options;
    const target = parseCloudEndpointUrl(ep.url);
    if (typeof target === 'string') {
      logger?.warn({ endpoint: ep.id, problem: target }, 'cloud endpoint has an unusable url');
      return;
    }
    const where = target.hostname ?? target.port ?? target.internal ?? '';
    const url =
      target.internal !== undefined ? target.url : this.options.publicUrl(target.proto, where);
    const tunnel = new CloudTunnel(ep.id, url, ep, {
      proto: target.proto,
      hostname: target.hostname,
      port: target.port,
      internal: target.internal,
    });
    try {
      if (ep.traffic_policy.trim() !== '') {
        const compiled = compileBindPolicy(ep.traffic_policy, target.proto, 'traffic_policy');
        tunnel.policy = {
          ownerId: ep.id,
          endpoint: endpointInputOf(tunnel),
          runner: compiled.bind({
            ownerId: ep.id,
            events: this.options.policyEvents,
            ipPolicyRules: (ids) => this.options.repos.ipPolicies.rulesFor(ids),
            internalOnline: (u) => internalOnline(registry, u),
            secrets: this.options.secrets,
          }),
        };
      }
    } catch (err) {
      logger?.warn({ err, endpoint: ep.id }, 'cloud endpoint traffic policy cannot run');
      return;
    }
    if (current) {
      this.live.delete(ep.id);
      registry.removeTunnel(current.id);
    }
    try {
      registry.addTunnel(tunnel);
      this.live.set(ep.id, tunnel);
      this.blocked.delete(ep.id);
    } catch (err) {
      // An agent holds the URL without pooling: the agent keeps it until it goes (retryBlocked);
      // say so once.
      if (!this.blocked.has(ep.id)) {
        logger?.warn({ err, endpoint: ep.id }, 'cloud endpoint url is served by an agent');
      }
      this.blocked.set(ep.id, ep);
      return;
    }
  }
}
