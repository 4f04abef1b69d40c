import { CODES, UnavailableError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns } from './described.js';
import { ResourceRepository } from './resource-repository.js';
import { refuseWhileEdgeUses } from './refs.js';
import type { ReservedAddrsTable } from './schema.js';

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

type ReservedAddrRow = Omit<ReservedAddrsTable, 'port'>;

/** The API's fields of a row (a created row also holds the port, which stays in the store). */
function toReservedAddr(row: ReservedAddrRow): ReservedAddr {
  const { id, description, metadata, created_at, addr, region } = row;
  return { id, description, metadata, created_at, addr, region };
}

/**
 * Reserved TCP addresses. Create takes the lowest free port of `--tcp-ports`; the unique `port`
 * column settles races between concurrent creates.
 * @example const { addr } = await addrs.create({ description: 'ssh' }); // 'tcp.example.com:20000'
 */
export class ReservedAddrRepository extends ResourceRepository<
  'reserved_addrs',
  ReservedAddr,
  ReservedAddrRow
> {
  constructor(readonly deps: RepoDeps) {
    super(deps.db, 'reserved_addrs', toReservedAddr, COLUMNS);
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

  async update(id: string, patch: ReservedAddrUpdate): Promise<ReservedAddr | undefined> {
    await this.writeColumns(id, describedChanges(patch));
    return this.get(id);
  }

  /** Delete; false when absent. Refused (409) while an edge uses the address as a hostport. */
  async delete(id: string): Promise<boolean> {
    const use = (edge: { edge_id: string }) =>
      `is a hostport of the edge ${edge.edge_id}. Remove it from that edge's hostports, or delete the edge, then delete the address.`;
    return this.deleteCheckedRow(id, (trx, row) =>
      refuseWhileEdgeUses(
        trx,
        id,
        CODES.addrInUse,
        `The reserved address ${row.addr} (${id})`,
        use,
      ),
    );
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
