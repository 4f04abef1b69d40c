import type { Transaction } from 'kysely';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { parseHostPort, splitHostPort } from '../core/host-port.js';
import { quote, shorten } from '../core/quote.js';
import type { Db, StoreSettings } from './deps.js';
import type { EdgeType } from './edge-modules.js';
import type { Database } from './schema.js';

/** A hostport an edge serves, and the reserved address (ra_) or domain (rd_) it stands on. */
export interface ResolvedHostport {
  hostport: string;
  target_id: string;
}

function example(type: EdgeType, settings: StoreSettings): string {
  return type === 'tcp'
    ? `${settings.tcpHost}:${settings.tcpPorts.first}`
    : `app.example.com:${settings.httpsPort}`;
}

/** Split and normalise one hostport (lowercase host, port without leading zeros). */
function parseHostport(
  value: string,
  field: string,
  type: EdgeType,
  settings: StoreSettings,
): { host: string; port: number } {
  // A host is a name (a wildcard `*.` first label included) or a bracketed IPv6 address.
  const text = value.trim().toLowerCase();
  const shaped = !/[\s/]/.test(text);
  const hp = shaped ? parseHostPort(text, { keepBrackets: true, minPort: 1 }) : undefined;
  if (hp) return hp;
  // A host with a port out of range is told apart from text that is no hostport at all.
  const digits = shaped ? splitHostPort(text)?.port : undefined;
  if (digits === undefined) {
    throw new ValidationError(
      CODES.hostportFormat,
      field,
      `must be 'hostname:portnumber', e.g. '${example(type, settings)}'; got ${quote(value)}`,
    );
  }
  throw new ValidationError(
    CODES.hostportPortRange,
    field,
    `the port must be from 1 to 65535; got ${shorten(digits, 12)} in ${quote(value)}`,
  );
}

/** The reserved address and the reserved domain `host:port` could stand on (ids, when they exist). */
async function reservationsAt(
  db: Db,
  host: string,
  port: number,
): Promise<{ hostport: string; addrId: string | undefined; domainId: string | undefined }> {
  const hostport = `${host}:${port}`;
  const addr = await db
    .selectFrom('reserved_addrs')
    .select('id')
    .where('addr', '=', hostport)
    .executeTakeFirst();
  const domain = await db
    .selectFrom('reserved_domains')
    .select('id')
    .where('domain', '=', host)
    .executeTakeFirst();
  return { hostport, addrId: addr?.id, domainId: domain?.id };
}

async function resolveTcp(
  db: Db,
  host: string,
  port: number,
  field: string,
): Promise<ResolvedHostport> {
  const { hostport, addrId, domainId } = await reservationsAt(db, host, port);
  if (addrId) return { hostport, target_id: addrId };
  if (domainId) {
    throw new ValidationError(
      CODES.tcpEdgeNeedsAddr,
      field,
      `${quote(host)} is a reserved domain, but TCP edges can only be associated with reserved TCP addresses. Use a TLS edge for domains, or the addr of a reserved address here.`,
    );
  }
  throw new ValidationError(
    CODES.addrNotReserved,
    field,
    `${quote(hostport)} is not a reserved TCP address. Reserve one with POST /reserved_addrs and use its addr.`,
  );
}

async function resolveTls(
  db: Db,
  host: string,
  port: number,
  field: string,
  settings: StoreSettings,
): Promise<ResolvedHostport> {
  const { hostport, addrId, domainId } = await reservationsAt(db, host, port);
  if (addrId || host === settings.tcpHost.toLowerCase()) {
    throw new ValidationError(
      CODES.tlsEdgeNeedsDomain,
      field,
      `${quote(hostport)} is a TCP address, but TLS edges can only be associated with reserved domains. Use a TCP edge for addresses, or '<reserved domain>:${settings.httpsPort}' here.`,
    );
  }
  if (!domainId) {
    throw new ValidationError(
      CODES.domainNotReserved,
      field,
      `${quote(host)} is not a reserved domain. Reserve it with POST /reserved_domains first; a wildcard reservation is used here only as its exact '*.' name.`,
    );
  }
  if (port !== settings.httpsPort) {
    throw new ValidationError(
      CODES.domainWrongPort,
      field,
      `TLS edge hostports must use port ${settings.httpsPort}, the port of the TLS ingress; use ${quote(`${host}:${settings.httpsPort}`)} instead of ${quote(hostport)}.`,
    );
  }
  return { hostport, target_id: domainId };
}

/**
 * Check every hostport of a TCP or TLS edge and find the reservation it stands on. Errors name the
 * list index, e.g. `hostports[1]`.
 * @example await resolveHostports(trx, 'tcp', ['tcp.burrow.test:20000'], settings)
 */
export async function resolveHostports(
  db: Db,
  type: EdgeType,
  hostports: string[],
  settings: StoreSettings,
): Promise<ResolvedHostport[]> {
  const resolved: ResolvedHostport[] = [];
  const seen = new Map<string, number>();
  for (const [i, value] of hostports.entries()) {
    const field = `hostports[${i}]`;
    const { host, port } = parseHostport(value, field, type, settings);
    const key = `${host}:${port}`;
    const first = seen.get(key);
    if (first !== undefined) {
      throw new ValidationError(
        CODES.invalidValue,
        field,
        `${quote(value)} is listed twice (also hostports[${first}]); list each hostport once`,
      );
    }
    seen.set(key, i);
    resolved.push(
      type === 'tcp'
        ? await resolveTcp(db, host, port, field)
        : await resolveTls(db, host, port, field, settings),
    );
  }
  return resolved;
}

/**
 * Make `hostports` the edge's whole set of hostports. A hostport belongs to one edge: one held by
 * another edge is refused with 409 naming that edge.
 */
export async function replaceHostports(
  trx: Transaction<Database>,
  edgeId: string,
  hostports: ResolvedHostport[],
): Promise<void> {
  if (hostports.length > 0) {
    const taken = await trx
      .selectFrom('edge_hostports')
      .select(['hostport', 'edge_id'])
      .where(
        'hostport',
        'in',
        hostports.map((h) => h.hostport),
      )
      .where('edge_id', '<>', edgeId)
      .orderBy('hostport')
      .executeTakeFirst();
    if (taken) throw hostportTaken(taken.hostport, taken.edge_id);
  }
  await trx.deleteFrom('edge_hostports').where('edge_id', '=', edgeId).execute();
  if (hostports.length > 0) {
    await trx
      .insertInto('edge_hostports')
      .values(
        hostports.map((h) => ({ hostport: h.hostport, edge_id: edgeId, target_id: h.target_id })),
      )
      .execute();
  }
}

/** The 409 for a hostport already served by another edge (`edgeId` unknown after a race). */
export function hostportTaken(hostport: string, edgeId?: string): ConflictError {
  const owner = edgeId ? `edge ${edgeId}` : 'another edge';
  return new ConflictError(
    CODES.hostportTaken,
    `The hostport ${quote(hostport)} already belongs to ${owner}; a hostport can be served by one edge only. Remove it from that edge first (PATCH its hostports).`,
  );
}
