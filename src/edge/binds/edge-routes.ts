/**
 * The API's TCP and TLS edges as routes in the TunnelRegistry, beside agents' and cloud
 * endpoints: each hostport of an edge is one route (a TCP port, or a TLS name the SNI router
 * matches), whose connect() opens the edge's backend (the labeled tunnels of a tunnel group, a
 * static address, failover and weighted members). The ingress carries an edge's connection like
 * any endpoint's: the same listener, the same connect gate (ip_restriction, TLS termination,
 * on_tcp_connect), the same relay, drain and meters (docs/architecture.md).
 *
 * Routes follow the store by change events (StoreFollower): an edge's write reloads that edge
 * alone, a change to a backend, IP policy or CA reloads the edges that read it, and a full reload
 * runs only at start, after a notice that names nothing, and on the slow reconcile. A route whose
 * name or port an agent holds waits, and is tried again when a tunnel leaves the registry.
 */
import type { Duplex } from 'node:stream';
import type { IpRule } from '../../core/cidr.js';
import { parseHostPort } from '../../core/host-port.js';
import type { Logger } from '../../core/logger.js';
import { compilePolicy, type PolicyEventLog, type PolicyRunner } from '../../policy/index.js';
import type { EndpointInput, SecretsLookup } from '../../policy/index.js';
import { DEFAULT_CONNECT_TIMEOUT_MS } from '../registry/connect-tunnel.js';
import { BackendBalancer, openUpstream, type BackendPlan } from '../registry/edge-routing.js';
import {
  loadEdgeSpec,
  loadEdgeSpecs,
  type EdgeSpec,
  type EdgeSpecSources,
} from '../registry/edge-specs.js';
import { internalOnline } from '../registry/internal-routing.js';
import type {
  EdgeTermination,
  OnlineTunnel,
  ProxyInfo,
  TunnelPolicy,
  TunnelRegistry,
} from '../registry/tunnel-registry.js';
import { TunnelConflictError } from '../registry/tunnel-registry.js';
import { StoreRouteSource } from './store-routes.js';

export interface EdgeRoutesOptions {
  repos: EdgeSpecSources;
  registry: TunnelRegistry;
  /** Where traffic policy events go; the API reads them from the same log. */
  policyEvents?: PolicyEventLog | undefined;
  /** What policies' `secrets.get` reads (the edge's SecretsResolver). */
  secrets?: SecretsLookup | undefined;
  logger?: Logger | undefined;
  /** The full reconcile's period (ms; 0: none). Default STORE_RECONCILE_MS. */
  syncIntervalMs?: number | undefined;
  /** Per dial of a backend target. Default 10 s. */
  connectTimeoutMs?: number | undefined;
  /** For weighted backends; tests pin it. */
  random?: (() => number) | undefined;
}

/** What every route of one edge shares: its backend plan and its policy, compiled once. */
interface EdgeShared {
  readonly spec: EdgeSpec;
  readonly balancer: BackendBalancer;
  readonly connectTimeoutMs: number;
  /** Bound once per edge, so rate-limit state and events belong to the edge. */
  readonly runner: PolicyRunner | undefined;
  readonly refusal: string | undefined;
  readonly termination: EdgeTermination | undefined;
}

/**
 * The `endpoint.*` variables of a hostport (an IPv6 host keeps its brackets).
 * @example edgeEndpoint(spec, 'tcp.burrow.test:20001').url // 'tcp://tcp.burrow.test:20001'
 */
function edgeEndpoint(spec: EdgeSpec, hostport: string): EndpointInput {
  const parsed = parseHostPort(hostport, { keepBrackets: true });
  return {
    id: spec.id,
    url: `${spec.type}://${hostport}`,
    host: parsed?.host ?? hostport,
    port: parsed?.port ?? 0,
    protocol: spec.type,
    addr: hostport,
  };
}

/** One hostport of an edge, as the registry holds it. */
class EdgeRoute implements OnlineTunnel {
  readonly sessionId = '';
  readonly forwardsTo = '';
  readonly metadata = '';
  readonly id: string;
  /** Routes of one hostport replace each other in the registry (same session '', same bind id). */
  readonly bindId: string;
  readonly proto: 'tcp' | 'tls';
  readonly url: string;
  readonly hostname: string | undefined;
  readonly port: number | undefined;
  readonly edge: { readonly id: string; readonly type: 'tcp' | 'tls' };
  readonly policy: TunnelPolicy | undefined;
  readonly ipRules: readonly IpRule[] | undefined;
  readonly termination: EdgeTermination | undefined;
  readonly refusal: string | undefined;
  readonly startedAt = new Date().toISOString();

  constructor(
    private readonly shared: EdgeShared,
    readonly hostport: string,
  ) {
    const { spec } = shared;
    const endpoint = edgeEndpoint(spec, hostport);
    this.id = `${spec.id}@${hostport}`;
    this.bindId = `edge:${hostport}`;
    this.proto = spec.type;
    this.url = `${spec.type}://${hostport}`;
    this.edge = { id: spec.id, type: spec.type };
    if (spec.type === 'tcp') this.port = endpoint.port;
    else this.hostname = endpoint.host;
    this.policy = shared.runner && { ownerId: spec.id, runner: shared.runner, endpoint };
    this.ipRules = spec.ipRules ?? undefined;
    this.termination = shared.termination;
    this.refusal = shared.refusal;
  }

  /** The backend's next target that takes the connection (fallbacks when a dial fails). */
  async connect(info: ProxyInfo): Promise<Duplex> {
    const plan: BackendPlan | null = this.shared.spec.backend;
    if (plan === null) throw new Error(`edge ${this.edge.id} has no backend`);
    const { stream } = await openUpstream(
      this.shared.balancer.targets(plan),
      { ...info, edgeType: this.edge.type === 'tcp' ? '1' : '2' },
      // Plaintext reaches the backend when the edge ended TLS (or for TCP): only then does a
      // static backend with tls.enabled get a TLS connection of its own.
      { plaintext: !info.passthroughTls, timeoutMs: this.shared.connectTimeoutMs },
    );
    return stream;
  }
}

/** Where one edge's routes stand: the spec they were built from, and those in the registry. */
interface LiveEdge {
  signature: string;
  /** What the spec was read from (EdgeSpec.inputs): changes to these reload this edge. */
  inputs: readonly string[];
  routes: EdgeRoute[];
}

/**
 * @example
 * const routes = new EdgeRoutes({ repos, registry, policyEvents });
 * await routes.start(); // every edge's hostports are routes from here on
 */
export class EdgeRoutes extends StoreRouteSource<EdgeRoute> {
  private readonly balancer: BackendBalancer;
  private readonly edges = new Map<string, LiveEdge>();

  constructor(private readonly options: EdgeRoutesOptions) {
    super(options.repos.edges.changes, options.registry, options.syncIntervalMs);
    this.balancer = new BackendBalancer(options.registry, options.random);
  }

  /**
   * Something edges read changed (a backend, IP policy or its rules, a CA): reload the edges that
   * read one of `inputs`, or every edge when the change could not say which (`undefined`).
   * @example routes.inputsChanged(['bkdtg_…']); // only the edges whose backend plan holds it
   */
  inputsChanged(inputs: readonly string[] | undefined): Promise<void> {
    if (inputs === undefined) return this.sync();
    const wanted = new Set(inputs);
    const ids: string[] = [];
    for (const [id, edge] of this.edges) {
      if (edge.inputs.some((input) => wanted.has(input))) ids.push(id);
    }
    return this.syncIds(ids);
  }

  protected removeAll(): void {
    for (const edge of this.edges.values()) for (const r of edge.routes) this.remove(r);
    this.edges.clear();
  }

  /** The full reload; failures are logged and the last good state kept, to be retried next time. */
  protected async reload(): Promise<void> {
    if (this.closed) return;
    const { repos, logger } = this.options;
    let specs: EdgeSpec[];
    try {
      specs = await loadEdgeSpecs(repos);
    } catch (err) {
      logger?.warn({ err }, 'could not reload edges; keeping the previous ones');
      return;
    }
    if (this.closed) return;
    const next = new Map(specs.map((spec) => [spec.id, spec]));
    const gone = [...this.edges.keys()].filter((id) => !next.has(id));
    this.apply([...next.entries(), ...gone.map((id): [string, null] => [id, null])]);
    this.retryBlocked();
  }

  /** Reload the edges `ids` alone: what a change event named (created, changed or deleted). */
  protected async reloadIds(ids: string[]): Promise<void> {
    if (this.closed) return;
    const { repos, logger } = this.options;
    let specs: (EdgeSpec | null)[];
    try {
      specs = await Promise.all(ids.map((id) => loadEdgeSpec(repos, id)));
    } catch (err) {
      logger?.warn({ err, edges: ids }, 'could not reload edges; keeping the previous ones');
      return;
    }
    if (this.closed) return;
    this.apply(ids.map((id, i) => [id, specs[i] ?? null]));
  }

  /**
   * Bring the edges named to their spec (null: not served any more). Out first, then in, in one
   * tick: a hostport that moves between edges has no gap. Edges not named are not touched.
   */
  private apply(specs: readonly (readonly [string, EdgeSpec | null])[]): void {
    const installs: EdgeRoute[] = [];
    let changed = 0;
    let removed = 0;
    for (const [id, spec] of specs) {
      const previous = this.edges.get(id);
      const signature = spec && JSON.stringify(spec);
      if (previous && previous.signature === signature) continue;
      if (previous) for (const route of previous.routes) this.remove(route);
      if (!spec || signature === null) {
        if (previous) {
          removed++;
          this.edges.delete(id);
          this.options.policyEvents?.forget(id);
        }
        continue;
      }
      changed++;
      const shared = this.share(spec);
      const routes = spec.hostports.map((hostport) => new EdgeRoute(shared, hostport));
      this.edges.set(id, { signature, inputs: spec.inputs, routes });
      installs.push(...routes);
    }
    for (const route of installs) this.install(route);
    if (changed + removed > 0)
      this.options.logger?.debug({ edges: this.edges.size, changed, removed }, 'edges reloaded');
  }

  /** A route an agent's tunnel held (the edge's spec is here, no reload needed). */
  protected retry(route: EdgeRoute): void {
    this.install(route);
  }

  /** Compile what every route of `spec` shares. */
  private share(spec: EdgeSpec): EdgeShared {
    const { registry, repos, logger } = this.options;
    let runner: PolicyRunner | undefined;
    let refusal: string | undefined;
    if (spec.policy !== null) {
      try {
        runner = compilePolicy(spec.policy, {
          protocol: spec.type,
          field: 'traffic_policy.value',
        }).bind({
          ownerId: spec.id,
          events: this.options.policyEvents,
          ipPolicyRules: (ids) => repos.ipPolicies.rulesFor(ids),
          internalOnline: (url) => internalOnline(registry, url),
          secrets: this.options.secrets,
        });
      } catch (err) {
        refusal = `the edge's stored traffic policy cannot run: ${(err as Error).message}`;
        logger?.error(
          { err, edge: spec.id },
          'stored traffic policy cannot run; refusing the edge its connections',
        );
      }
    }
    return {
      spec,
      balancer: this.balancer,
      connectTimeoutMs: this.options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      runner,
      refusal,
      termination: spec.termination
        ? { minVersion: spec.termination.minVersion, clientCas: spec.mutualTls?.caPems ?? null }
        : undefined,
    };
  }

  private install(route: EdgeRoute): void {
    const { registry, logger } = this.options;
    if (registry.tunnel(route.id) === route) return;
    try {
      registry.addTunnel(route);
      this.blocked.delete(route.id);
    } catch (err) {
      if (!(err instanceof TunnelConflictError)) throw err;
      // An agent holds the name or port: it keeps it until it goes (retryBlocked); say so once.
      if (!this.blocked.has(route.id)) {
        logger?.warn(
          { edge: route.edge.id, hostport: route.hostport, holder: err.holder.id },
          "an agent's endpoint holds this edge hostport; the edge serves it once the agent goes",
        );
      }
      this.blocked.set(route.id, route);
    }
  }

  private remove(route: EdgeRoute): void {
    this.blocked.delete(route.id);
    if (this.options.registry.tunnel(route.id) === route) {
      this.options.registry.removeTunnel(route.id);
    }
  }
}
