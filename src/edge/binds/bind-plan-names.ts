/**
 * Where an http, https or tls bind is served: the name it asked for, once the credential's ACL
 * permits it, it is owned (reserved, covered by a reserved wildcard, a wildcard only by its exact
 * reservation, or under the base domain), no edge uses it and nobody else holds it; or, when it
 * asked for none, a random name under the base domain (the one a resumed bind had, while it is
 * still free and allowed).
 */
import { aclPermits } from '../../core/acl.js';
import { hostnameProblem, isAtOrUnder, normalizeName } from '../../core/hostname.js';
import { randomDnsLabel } from '../../core/ids.js';
import { quote } from '../../core/quote.js';
import { holderOf, type TunnelProto } from '../registry/tunnel-registry.js';
import { publicEndpointUrl } from './agent-edge-settings.js';
import { refusals } from './agent-errors.js';
import {
  holderInTheWay,
  type BindPlan,
  type BindPlanCall,
  type BindPlanContext,
} from './bind-plan.js';

/** Random-name attempts before giving up; with 36^10 names a second one is already unlikely. */
const RANDOM_NAME_ATTEMPTS = 8;

/**
 * The plan of a bind by name: `requested` as the bind gave it (undefined: a random name, or the
 * one `call.restored` from a bind token), or the refusal.
 * @example (await planName({ ...context, binder, mayReplace }, 'https', 'app.example.com')).url // 'https://app.example.com:8443'
 */
export async function planName(
  call: BindPlanCall,
  proto: TunnelProto,
  requested: string | undefined,
): Promise<BindPlan> {
  const { repos, registry, settings, binder, mayReplace } = call;
  if (requested === undefined) {
    const old = call.restored?.hostname;
    if (
      old &&
      !holderInTheWay(registry, { hostname: old }, mayReplace) &&
      (await nameAllowed(call, old))
    ) {
      return namePlan(call, proto, old, undefined, true);
    }
    const name = randomName(call);
    if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name, true);
    return namePlan(call, proto, name, undefined, true);
  }
  const name = normalizeName(requested.trim());
  const problem = hostnameProblem(name, true);
  if (problem) {
    throw refusals.badRequest(`${quote(requested)} is not a valid hostname (${problem})`);
  }
  if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name);
  const domainId = await ownership(call, name);
  const edge = await repos.edges.edgeForHostport([`${name}:${settings.httpsPort}`, `${name}:443`]);
  if (edge) throw refusals.usedByEdge(name, edge.edge_id);
  const holder = holderInTheWay(registry, { hostname: name }, mayReplace);
  if (holder) throw refusals.alreadyOnline(name, holderOf(holder));
  return namePlan(call, proto, name, domainId, false);
}

/** A random name under the base domain that nobody holds. */
function randomName({ registry, settings }: BindPlanContext): string {
  for (let i = 0; i < RANDOM_NAME_ATTEMPTS; i++) {
    const name = `${randomDnsLabel(10)}.${settings.baseDomain.toLowerCase()}`;
    if (!registry.holder({ hostname: name })) return name;
  }
  throw refusals.badRequest('no free random name could be found; try again');
}

/** The reservation `name` stands on (undefined under the base domain), or the refusal. */
async function ownership(
  { repos, settings }: BindPlanContext,
  name: string,
): Promise<string | undefined> {
  if (name.startsWith('*.')) {
    const exact = await repos.reservedDomains.findByDomain(name);
    if (!exact) throw refusals.wildcardNotExact(name);
    return exact.id;
  }
  const covering = await repos.reservedDomains.findCovering(name);
  if (covering) return covering.id;
  const base = settings.baseDomain.toLowerCase();
  if (name !== base && isAtOrUnder(name, base)) return undefined;
  throw refusals.nameNotReserved(name, base);
}

/** Whether a restored random name may still be used (ACL, ownership, no edge). */
async function nameAllowed(call: BindPlanCall, name: string): Promise<boolean> {
  if (!aclPermits(call.binder.acl, { kind: 'domain', name })) return false;
  try {
    await ownership(call, name);
  } catch {
    return false;
  }
  const { repos, settings } = call;
  const edge = await repos.edges.edgeForHostport([`${name}:${settings.httpsPort}`]);
  return edge === undefined;
}

function namePlan(
  { settings }: BindPlanContext,
  proto: TunnelProto,
  hostname: string,
  domainId: string | undefined,
  random: boolean,
): BindPlan {
  return { proto, hostname, url: publicEndpointUrl(settings, proto, hostname), domainId, random };
}
