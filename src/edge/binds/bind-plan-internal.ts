/**
 * Internal endpoints: a bind with the `internal` binding, or one whose name ends in `.internal`,
 * is reached only through `forward-internal`, never from outside. Its name needs no reservation
 * (nobody outside reaches it), but the credential's ACL still applies and one holder (or pool)
 * keeps it, as for public names.
 */
import { aclPermits } from '../../core/acl.js';
import { parseHostPort } from '../../core/host-port.js';
import { hostnameProblem } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import type { Bind } from '../../protocol/index.js';
import { holderOf, INTERNAL_SUFFIX, type TunnelProto } from '../registry/tunnel-registry.js';
import { refusals } from './agent-errors.js';
import {
  BIND_ADDR,
  normalizeName,
  requestedAddr,
  requestedName,
  type Binder,
  type BindPlan,
  type BindPlanContext,
  type MayReplace,
} from './bind-plan.js';

/**
 * An internal endpoint's plan (binding `internal`, or a name ending `.internal`), or undefined
 * for a public bind. A name outside `.internal` with the `internal` binding is refused.
 * @example internalPlan(context, bind, 'https', binder, mayReplace)?.url // 'https://api.internal'
 */
export function internalPlan(
  context: BindPlanContext,
  bind: Bind,
  proto: TunnelProto,
  binder: Binder,
  mayReplace: MayReplace,
): BindPlan | undefined {
  const bindings = bind.Extra?.Bindings ?? [];
  const asked = bindings.some((b) => typeof b === 'string' && b.toLowerCase() === 'internal');
  const requested =
    proto === 'tcp' ? requestedAddr(bind) : requestedName(bind, context.settings.baseDomain);
  const raw = requested === undefined ? '' : normalizeName(requested);
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
  if (!aclPermits(binder.acl, { kind: 'domain', name: host })) throw refusals.aclName(host);
  const holder = context.registry.holder({ internal: raw });
  if (holder && !mayReplace(holder)) throw refusals.alreadyOnline(raw, holderOf(holder));
  const url = proto === 'tcp' ? `tcp://${raw}` : `${proto}://${raw}`;
  return { proto, url, internal: raw, random: false };
}
