/**
 * Internal endpoints: a bind with the `internal` binding, or one whose name ends in `.internal`,
 * is reached only through `forward-internal`, never from outside. Its name needs no reservation
 * (nobody outside reaches it), but the credential's ACL still applies and one holder (or pool)
 * keeps it, as for public names.
 */
import { aclPermits } from '../../core/acl.js';
import { parseHostPort } from '../../core/host-port.js';
import { hostnameProblem, normalizeName } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import type { Bind } from '../../protocol/index.js';
import { holderOf, INTERNAL_SUFFIX, type TunnelProto } from '../registry/tunnel-registry.js';
import { refusals } from './agent-errors.js';
import { BIND_ADDR, holderInTheWay, type BindPlan, type BindPlanCall } from './bind-plan.js';

/**
 * An internal endpoint's plan (binding `internal`, or a name ending `.internal`), or undefined
 * for a public bind. `requested` is the name (or, for tcp, the address) the bind asked for, as
 * requestedName or requestedAddr read it. A name outside `.internal` with the `internal` binding
 * is refused.
 * @example internalPlan({ ...context, binder, mayReplace }, bind, 'https', 'api.internal')?.url // 'https://api.internal'
 */
export function internalPlan(
  call: BindPlanCall,
  bind: Bind,
  proto: TunnelProto,
  requested: string | undefined,
): BindPlan | undefined {
  const bindings = bind.Extra?.Bindings ?? [];
  const asked = bindings.some((b) => typeof b === 'string' && b.toLowerCase() === 'internal');
  const raw = requested === undefined ? '' : normalizeName(requested.trim());
  const host = proto === 'tcp' ? (parseHostPort(raw, BIND_ADDR)?.host ?? raw) : raw;
  const isInternal = host.endsWith(INTERNAL_SUFFIX);
  if (!asked && !isInternal) return undefined;
  if (!isInternal) throw refusals.internalName(requested ?? '(a random name)');
  const label = host.slice(0, -INTERNAL_SUFFIX.length);
  if (label === '' || hostnameProblem(`${label}.example`, false)) {
    throw refusals.badRequest(
      `${quote(requested ?? '')} is not a valid internal name; use a DNS name ending in .internal, like api.internal`,
    );
  }
  if (proto === 'tcp' && !parseHostPort(raw, BIND_ADDR)) {
    throw refusals.badRequest(
      `the internal TCP address ${quote(requested ?? '')} must have the form name.internal:port`,
    );
  }
  if (!aclPermits(call.binder.acl, { kind: 'domain', name: host })) throw refusals.aclName(host);
  const holder = holderInTheWay(call.registry, { internal: raw }, call.mayReplace);
  if (holder) throw refusals.alreadyOnline(raw, holderOf(holder));
  return { proto, url: `${proto}://${raw}`, internal: raw, random: false };
}
