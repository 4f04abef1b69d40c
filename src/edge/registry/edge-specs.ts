/**
 * The stored TCP and TLS edges, read into what their live traffic needs: hostports, the resolved
 * backend plan, IP rules, the policy text and TLS settings. A spec is plain data, so the runtime
 * compares its JSON with the last one to see whether an edge changed at all.
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
  const rulesOf = memo((policyId) => repos.ipPolicies.rulesFor([policyId]));
  const pemsOf = memo((caId) => repos.certificateAuthorities.pemsFor([caId]));

  return Promise.all(
    edges.map(async (edge): Promise<EdgeSpec> => {
      const ip = edge.ip_restriction?.enabled ? edge.ip_restriction : null;
      const mtls = edge.mutual_tls?.enabled ? edge.mutual_tls : null;
      const term = edge.tls_termination;
      const terminated = term?.enabled === true && term.terminate_at === 'edge';
      return {
        id: edge.id,
        type: edge.type,
        hostports: edge.hostports ?? [],
        backend: edge.backend?.enabled ? planBackend(edge.backend.backend_id, backends) : null,
        ipRules: ip ? (await Promise.all(ip.ip_policy_ids.map(rulesOf))).flat() : null,
        policy: edge.traffic_policy?.enabled ? edge.traffic_policy.value : null,
        // Mutual TLS is only possible where TLS ends; the store refuses it otherwise, and should a
        // row say so anyway, terminating keeps the client-certificate check rather than drop it.
        termination:
          edge.type === 'tls' && (terminated || mtls)
            ? { minVersion: terminated ? term.min_version : null }
            : null,
        mutualTls: mtls
          ? { caPems: (await Promise.all(mtls.certificate_authority_ids.map(pemsOf))).flat() }
          : null,
      };
    }),
  );
}
