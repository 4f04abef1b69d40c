/**
 * The stored TCP and TLS edges, read into what their live traffic needs: hostports, the resolved
 * backend plan, IP rules, the policy text and TLS settings. A spec is plain data, so the runtime
 * compares its JSON with the last one to see whether an edge changed at all. `loadEdgeSpecs` reads
 * every serving edge (start, and the slow reconcile); `loadEdgeSpec` one, by id (a change event).
 */
import type { IpRule } from '../../core/cidr.js';
import type { Backend } from '../../store/backend-kinds.js';
import type { Edge, EdgeType, TlsTerminationModule } from '../../store/edges.js';
import type { Repositories } from '../../store/index.js';
import type { PageRequest, Page } from '../../store/paging.js';
import { planBackend, type BackendPlan } from './edge-routing.js';

/** One edge as its traffic sees it. Modules that are unset or disabled are null. */
export interface EdgeSpec {
  id: string;
  type: EdgeType;
  /** `host:port`, lowercase, as stored. */
  hostports: string[];
  backend: BackendPlan | null;
  /** The rules of every IP policy of the ip_restriction module, combined. */
  ipRules: IpRule[] | null;
  /** The traffic_policy module's text (JSON or YAML). */
  policy: string | null;
  /** TLS edges terminated at the edge; null means passthrough. */
  termination: { minVersion: TlsTerminationModule['min_version'] } | null;
  /** TLS edges with mutual TLS: the CA certificates client certificates must chain to. */
  mutualTls: { caPems: string[] } | null;
  /**
   * Every backend (members included), IP policy and CA the spec was read from: a change to one of
   * them reloads the edges that list it, and no other.
   */
  inputs: string[];
}

type Lister<T> = (page: PageRequest) => Promise<Page<T>>;

async function all<T>(list: Lister<T>): Promise<T[]> {
  const out: T[] = [];
  let beforeId: string | undefined;
  do {
    const page = await list({ beforeId, limit: 100 });
    out.push(...page.items);
    beforeId = page.nextBeforeId;
  } while (beforeId !== undefined);
  return out;
}

/** The repositories edges are read from. */
export type EdgeSpecSources = Pick<
  Repositories,
  'edges' | 'backends' | 'ipPolicies' | 'certificateAuthorities'
>;

/** Every backend of every type, by id. */
async function allBackends(repos: EdgeSpecSources): Promise<Map<string, Backend>> {
  const { backends } = repos;
  const lists = await Promise.all<Backend[]>([
    all((p) => backends.tunnelGroups.list(p)),
    all((p) => backends.failovers.list(p)),
    all((p) => backends.weighted.list(p)),
    all((p) => backends.statics.list(p)),
  ]);
  return new Map(lists.flat().map((b) => [b.id, b]));
}

/** Memoises one lookup per key for the length of one load. */
function memo<T>(load: (key: string) => Promise<T>): (key: string) => Promise<T> {
  const seen = new Map<string, Promise<T>>();
  return (key) => {
    let hit = seen.get(key);
    if (!hit) {
      hit = load(key);
      seen.set(key, hit);
    }
    return hit;
  };
}

/** The ids a backend plan was built from (the backend and its members, recursively). */
function planIds(plan: BackendPlan, into: string[]): void {
  into.push(plan.id);
  if (plan.type === 'failover') for (const m of plan.members) planIds(m, into);
  if (plan.type === 'weighted') for (const m of plan.members) planIds(m.plan, into);
}

/** How one load reads what edges refer to, memoised for its length. */
interface SpecLookups {
  backendPlan: (backendId: string) => Promise<BackendPlan>;
  rulesOf: (policyId: string) => Promise<IpRule[]>;
  pemsOf: (caId: string) => Promise<string[]>;
}

function lookups(repos: EdgeSpecSources, backendPlan: SpecLookups['backendPlan']): SpecLookups {
  return {
    backendPlan,
    rulesOf: memo((policyId) => repos.ipPolicies.rulesFor([policyId])),
    pemsOf: memo((caId) => repos.certificateAuthorities.pemsFor([caId])),
  };
}

async function specOf(edge: Edge, look: SpecLookups): Promise<EdgeSpec> {
  const ip = edge.ip_restriction?.enabled ? edge.ip_restriction : null;
  const mtls = edge.mutual_tls?.enabled ? edge.mutual_tls : null;
  const term = edge.tls_termination;
  const terminated = term?.enabled === true && term.terminate_at === 'edge';
  const backend = edge.backend?.enabled ? await look.backendPlan(edge.backend.backend_id) : null;
  const inputs: string[] = [];
  if (backend) planIds(backend, inputs);
  if (ip) inputs.push(...ip.ip_policy_ids);
  if (mtls) inputs.push(...mtls.certificate_authority_ids);
  return {
    id: edge.id,
    type: edge.type,
    hostports: edge.hostports ?? [],
    backend,
    ipRules: ip ? (await Promise.all(ip.ip_policy_ids.map(look.rulesOf))).flat() : null,
    policy: edge.traffic_policy?.enabled ? edge.traffic_policy.value : null,
    // Mutual TLS is only possible where TLS ends; the store refuses it otherwise, and should a
    // row say so anyway, terminating keeps the client-certificate check rather than drop it.
    termination:
      edge.type === 'tls' && (terminated || mtls)
        ? { minVersion: terminated ? term.min_version : null }
        : null,
    mutualTls: mtls
      ? { caPems: (await Promise.all(mtls.certificate_authority_ids.map(look.pemsOf))).flat() }
      : null,
    inputs,
  };
}

/**
 * Read every TCP and TLS edge that has hostports, with what its modules reference, in a handful of
 * queries (edges, backends by type, then one per IP policy and CA in use).
 * @example const specs = await loadEdgeSpecs(repos);
 */
export async function loadEdgeSpecs(repos: EdgeSpecSources): Promise<EdgeSpec[]> {
  // An edge without hostports cannot be reached, so only serving edges are read.
  const edges: Edge[] = await repos.edges.listServing();
  const needsBackends = edges.some((e) => e.backend?.enabled);
  const backends = needsBackends ? await allBackends(repos) : new Map<string, Backend>();
  const look = lookups(repos, (id) => Promise.resolve(planBackend(id, backends)));
  return Promise.all(edges.map((edge) => specOf(edge, look)));
}

/**
 * The edge `id` as its traffic sees it, reading only that edge and what it refers to; null when
 * there is no such edge or it serves no hostport (nothing of it is routed).
 * @example const spec = await loadEdgeSpec(repos, 'edgtls_…'); // null once deleted
 */
export async function loadEdgeSpec(repos: EdgeSpecSources, id: string): Promise<EdgeSpec | null> {
  const edge = await repos.edges.get(id);
  if (!edge?.hostports || edge.hostports.length === 0) return null;
  const look = lookups(repos, async (backendId) => {
    // The backend and its members, one read each, then planned like the full load plans them.
    const backends = new Map<string, Backend>();
    const pending = [backendId];
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      if (backends.has(next)) continue;
      const backend = await repos.backends.get(next);
      if (!backend) continue;
      backends.set(next, backend);
      if (backend.type === 'failover') pending.push(...backend.backends);
      if (backend.type === 'weighted') pending.push(...Object.keys(backend.backends));
    }
    return planBackend(backendId, backends);
  });
  return specOf(edge, look);
}
