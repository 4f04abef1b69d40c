/**
 * Where a tcp bind is served: the address it asked for, once the credential's ACL permits it, it
 * is reserved on the TCP host, no edge uses it and nobody else holds its port; or, when it asked
 * for none, a random port of the range that is neither reserved nor online (the one a resumed
 * bind had first, while it still is).
 */
import { randomInt } from 'node:crypto';
import { aclPermits } from '../../core/acl.js';
import { parseHostPort } from '../../core/host-port.js';
import { quote } from '../../core/quote.js';
import { holderOf } from '../registry/tunnel-registry.js';
import { publicEndpointUrl } from './agent-edge-settings.js';
import { refusals } from './agent-errors.js';
import { BIND_ADDR, holderInTheWay, type BindPlan, type BindPlanCall } from './bind-plan.js';

/**
 * The plan of a tcp bind: `requested` as the bind gave it (undefined: a random port, or the one
 * `call.restored` from a bind token), or the refusal.
 * @example (await planTcp({ ...context, binder, mayReplace }, 'localhost:20001')).url // 'tcp://localhost:20001'
 */
export async function planTcp(
  call: BindPlanCall,
  requested: string | undefined,
): Promise<BindPlan> {
  const { repos, registry, settings, binder, mayReplace } = call;
  if (requested === undefined) {
    if (!aclPermits(binder.acl, { kind: 'random-addr' })) throw refusals.aclRandomAddr();
    const port = await randomPort(call);
    return { proto: 'tcp', port, url: publicEndpointUrl(settings, 'tcp', port), random: true };
  }
  const hp = parseHostPort(requested, BIND_ADDR);
  if (!hp) {
    throw refusals.badRequest(
      `the TCP address ${quote(requested)} must have the form host:port, e.g. '${settings.tcpHost}:${settings.tcpPorts.first}'`,
    );
  }
  const addr = `${hp.host.toLowerCase()}:${hp.port}`;
  if (!aclPermits(binder.acl, { kind: 'addr', host: hp.host, port: hp.port })) {
    throw refusals.aclAddr(addr);
  }
  const reserved =
    hp.host.toLowerCase() === settings.tcpHost.toLowerCase()
      ? await repos.reservedAddrs.findByAddr(addr)
      : undefined;
  if (!reserved) throw refusals.addrNotReserved(addr);
  const edge = await repos.edges.edgeForHostport([addr]);
  if (edge) throw refusals.usedByEdge(addr, edge.edge_id);
  const holder = holderInTheWay(registry, { port: hp.port }, mayReplace);
  if (holder) throw refusals.alreadyOnline(addr, holderOf(holder));
  return {
    proto: 'tcp',
    port: hp.port,
    url: publicEndpointUrl(settings, 'tcp', hp.port),
    addrId: reserved.id,
    random: false,
  };
}

/**
 * A port of the range that is neither reserved nor online; the restored one first when it is (or
 * its holder may be replaced).
 */
async function randomPort(call: BindPlanCall): Promise<number> {
  const { registry, settings, mayReplace } = call;
  const preferred = call.restored?.port;
  const { first, last } = settings.tcpPorts;
  const reserved = await reservedPorts(call);
  const usable = (port: number): boolean =>
    port >= first &&
    port <= last &&
    !reserved.has(port) &&
    !holderInTheWay(registry, { port }, mayReplace);
  if (preferred !== undefined && usable(preferred)) return preferred;
  const size = last - first + 1;
  const start = randomInt(size);
  for (let i = 0; i < size; i++) {
    const port = first + ((start + i) % size);
    if (!reserved.has(port) && !registry.holder({ port })) return port;
  }
  throw refusals.noFreePort(`${first}-${last}`);
}

/** Every reserved TCP address's port, read page by page. */
async function reservedPorts({ repos }: BindPlanCall): Promise<Set<number>> {
  const ports = new Set<number>();
  let beforeId: string | undefined;
  for (;;) {
    const page = await repos.reservedAddrs.list({ beforeId, limit: 100 });
    for (const { addr } of page.items) {
      const hp = parseHostPort(addr, BIND_ADDR);
      if (hp) ports.add(hp.port);
    }
    if (page.nextBeforeId === undefined) return ports;
    beforeId = page.nextBeforeId;
  }
}
