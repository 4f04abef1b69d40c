import type { Kysely } from 'kysely';
import { CODES, ConflictError, UnavailableError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns } from './described.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
import { refuseWhileReferenced } from './refs.js';
import type { Database, ReservedAddrsTable } from './schema.js';

/** A reserved TCP address: `<tcp host>:<port>`, assigned by the server. */
export interface ReservedAddr {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  addr: string;
  region: string;
}

export interface ReservedAddrCreate {
  description?: string | undefined;
  metadata?: string | undefined;
  region?: string | undefined;
}

export type ReservedAddrUpdate = Pick<ReservedAddrCreate, 'description' | 'metadata'>;

/**
 * How often create re-reads the free ports after losing a race for one to a concurrent create.
 * Each loss means another reservation succeeded, so this bounds only pathological contention.
 */
const MAX_ALLOCATION_ATTEMPTS = 50;

const COLUMNS = ['id', 'description', 'metadata', 'created_at', 'addr', 'region'] as const;

function toReservedAddr(row: Omit<ReservedAddrsTable, 'port'>): ReservedAddr {
  return {
    id: row.id,
    description: row.description,
    metadata: row.metadata,
    created_at: row.created_at,
    addr: row.addr,
    region: row.region,
  };
}

/**
 * Reserved TCP addresses. Create takes the lowest free port of `--tcp-ports`; the unique `port`
 * column settles races between concurrent creates.
 * @example const { addr } = await addrs.create({ description: 'ssh' }); // 'tcp.example.com:20000'
 */
export class ReservedAddrRepository {
  constructor(readonly deps: RepoDeps) {}

  private get db(): Kysely<Database> {
    return this.deps.db;
  }

  async create(input: ReservedAddrCreate): Promise<ReservedAddr> {
    const host = this.deps.settings.tcpHost.toLowerCase();
    for (let attempt = 0; attempt < MAX_ALLOCATION_ATTEMPTS; attempt++) {
      const port = await this.lowestFreePort();
      if (port === undefined) throw this.exhausted();
      const row: ReservedAddrsTable = {
        id: newId(ID_PREFIX.reservedAddr),
        ...describedColumns(input),
        addr: `${host}:${port}`,
        port,
        region: input.region ?? '',
      };
      try {
        await this.db.insertInto('reserved_addrs').values(row).execute();
        return toReservedAddr(row);
      } catch (err) {
        // Another create took this port between our read and our insert: read again.
        if (!isUniqueViolation(err)) throw err;
      }
    }
    throw new UnavailableError(
      CODES.noFreeAddress,
      'Could not reserve a TCP address because other reservations kept taking the free ports at the same time. Retry the request.',
    );
  }

  async get(id: string): Promise<ReservedAddr | undefined> {
    const row = await this.db
      .selectFrom('reserved_addrs')
      .select(COLUMNS)
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toReservedAddr(row);
  }

  async list(page: PageRequest): Promise<Page<ReservedAddr>> {
    const result = await selectPage(this.db.selectFrom('reserved_addrs').select(COLUMNS), page);
    return { items: result.items.map(toReservedAddr), nextBeforeId: result.nextBeforeId };
  }

  async update(id: string, patch: ReservedAddrUpdate): Promise<ReservedAddr | undefined> {
    const set: Partial<ReservedAddrsTable> = describedChanges(patch);
    if (Object.keys(set).length > 0)
      await this.db.updateTable('reserved_addrs').set(set).where('id', '=', id).execute();
    return this.get(id);
  }

  /** Delete; false when absent. Refused (409) while an edge uses the address as a hostport. */
  async delete(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('reserved_addrs')
        .select(['id', 'addr'])
        .where('id', '=', id)
        .executeTakeFirst();
      if (!row) return false;
      const hostport = await trx
        .selectFrom('edge_hostports')
        .select('edge_id')
        .where('target_id', '=', id)
        .limit(1)
        .executeTakeFirst();
      if (hostport) {
        throw new ConflictError(
          CODES.addrInUse,
          `The reserved address ${row.addr} (${id}) is a hostport of the edge ${hostport.edge_id}. Remove it from that edge's hostports, or delete the edge, then delete the address.`,
        );
      }
      await refuseWhileReferenced(
        trx,
        id,
        CODES.addrInUse,
        (by) =>
          `The reserved address ${row.addr} (${id}) is still used by ${by}. Remove that use first.`,
      );
      await trx.deleteFrom('reserved_addrs').where('id', '=', id).execute();
      return true;
    });
  }

  /** The reservation of `hostport` (`host:port`, host case-insensitive), or undefined. */
  async findByAddr(hostport: string): Promise<ReservedAddr | undefined> {
    const row = await this.db
      .selectFrom('reserved_addrs')
      .select(COLUMNS)
      .where('addr', '=', hostport.toLowerCase())
      .executeTakeFirst();
    return row && toReservedAddr(row);
  }

  /** The lowest port of the configured range that no reservation holds, or undefined. */
  private async lowestFreePort(): Promise<number | undefined> {
    const { first, last } = this.deps.settings.tcpPorts;
    const taken = await this.db
      .selectFrom('reserved_addrs')
      .select('port')
      .where('port', '>=', first)
      .where('port', '<=', last)
      .orderBy('port', 'asc')
      .execute();
    let candidate = first;
    for (const { port } of taken) {
      if (port > candidate) break;
      candidate = port + 1;
    }
    return candidate <= last ? candidate : undefined;
  }

  private exhausted(): UnavailableError {
    const { tcpHost, tcpPorts } = this.deps.settings;
    return new UnavailableError(
      CODES.noFreeAddress,
      `No TCP address is free: every port of the range ${tcpPorts.first}-${tcpPorts.last} on ${tcpHost} is reserved. Delete a reserved address you no longer need, or widen the range with the server's --tcp-ports option (BURROW_TCP_PORTS).`,
    );
  }
}
