/**
 * Where an http, https or tls bind is served: the name it asked for, once the credential's ACL
 * permits it, it is owned (reserved, covered by a reserved wildcard, a wildcard only by its exact
 * reservation, or under the base domain), no edge uses it and nobody else holds it; or, when it
 * asked for none, a random name under the base domain (the one a resumed bind had, while it is
 * still free and allowed).
 */
import { aclPermits } from '../../core/acl.js';
import { hostnameProblem, isAtOrUnder } from '../../core/hostname.js';
import { randomDnsLabel } from '../../core/ids.js';
import { quote } from '../../core/quote.js';
import { holderOf, type TunnelProto } from '../registry/tunnel-registry.js';
import { publicEndpointUrl } from './agent-edge-settings.js';
import { refusals } from './agent-errors.js';
import {
  isFree,
  normalizeName,
  type Binder,
  type BindPlan,
  type BindPlanContext,
  type MayReplace,
} from './bind-plan.js';
import type { BindGrant } from './session-resumption.js';

/** Random-name attempts before giving up; with 36^10 names a second one is already unlikely. */
const RANDOM_NAME_ATTEMPTS = 8;

/**
 * The plan of a bind by name: `requested` as the bind gave it (undefined: a random name, or the
 * one `restored` from a bind token), or the refusal.
 * @example (await planName(context, 'https', 'app.example.com', binder, undefined, mayReplace)).url // 'https://app.example.com:8443'
 */
export async function planName(
  context: BindPlanContext,
  proto: TunnelProto,
  requested: string | undefined,
  binder: Binder,
  restored: BindGrant | undefined,
  mayReplace: MayReplace,
): Promise<BindPlan> {
  const { repos, registry, settings } = context;
  if (requested === undefined) {
    const old = restored?.hostname;
    if (
      old &&
      isFree(registry, { hostname: old }, mayReplace) &&
      (await nameAllowed(context, old, binder))
    ) {
      return namePlan(context, proto, old, undefined, true);
    }
    const name = randomName(context);
    if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name, true);
    return namePlan(context, proto, name, undefined, true);
  }
  const name = normalizeName(requested);
  const problem = hostnameProblem(name, true);
  if (problem) {
    throw refusals.badRequest(`${quote(requested)} is not a valid hostname (${problem})`);
  }
  if (!aclPermits(binder.acl, { kind: 'domain', name })) throw refusals.aclName(name);
  const domainId = await ownership(context, name);
  const edge = await repos.edges.edgeForHostport([`${name}:${settings.httpsPort}`, `${name}:443`]);
  if (edge) throw refusals.usedByEdge(name, edge.edge_id);
  if (!isFree(registry, { hostname: name }, mayReplace)) {
    const holder = registry.holder({ hostname: name });
    throw refusals.alreadyOnline(name, holder && holderOf(holder));
  }
  return namePlan(context, proto, name, domainId, false);
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
async function nameAllowed(
  context: BindPlanContext,
  name: string,
  binder: Binder,
): Promise<boolean> {
  if (!aclPermits(binder.acl, { kind: 'domain', name })) return false;
  try {
    await ownership(context, name);
  } catch {
    return false;
  }
  const { repos, settings } = context;
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
