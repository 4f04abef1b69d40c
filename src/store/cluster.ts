import { sql, type Kysely, type RawBuilder, type Selectable, type Transaction } from 'kysely';
import type { Dialect } from './database.js';
import type { Database, OnlineSessionsTable, OnlineTunnelsTable } from './schema.js';

/** A node of the cluster, as the store sees it. */
export interface NodeRow {
  id: string;
  /** 'all', 'api' or 'edge'. */
  role: string;
  /** Where other nodes reach its node link; '' when it has none. */
  linkAddress: string;
  startedAt: string;
  /** ms since its last heartbeat, by the database's clock */
  ageMs: number;
}

/** An agent session online on some node; `data` holds its display fields. */
export interface OnlineSessionRow {
  id: string;
  nodeId: string;
  credentialId: string;
  data: Record<string, unknown>;
}

/**
 * A tunnel online on some node. `routeKey` is where it is served ('h:<hostname>', 'p:<port>',
 * 'i:<internal>'), null for labeled tunnels; `data.bindId` identifies the bind across resumption.
 */
export interface OnlineTunnelRow {
  id: string;
  sessionId: string;
  nodeId: string;
  routeKey: string | null;
  pooling: boolean;
  data: Record<string, unknown>;
}

/** What claimTunnel did: refused because of `holder`, or inserted after deleting `replaced`. */
export type ClaimResult = { holder: OnlineTunnelRow } | { replaced: OnlineTunnelRow[] };

/** Rows per INSERT: well under SQLite's and PostgreSQL's bound-parameter limits. */
const INSERT_CHUNK = 500;

function chunks<T>(items: readonly T[], size = INSERT_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function parseData(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  // Only this repository writes the column, always an object; anything else reads as empty.
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function toSession(r: Selectable<OnlineSessionsTable>): OnlineSessionRow {
  return { id: r.id, nodeId: r.node_id, credentialId: r.credential_id, data: parseData(r.data) };
}

function toTunnel(r: Selectable<OnlineTunnelsTable>): OnlineTunnelRow {
  return {
    id: r.id,
    sessionId: r.session_id,
    nodeId: r.node_id,
    routeKey: r.route_key,
    pooling: Number(r.pooling) === 1,
    data: parseData(r.data),
  };
}

function sessionValues(r: OnlineSessionRow): OnlineSessionsTable {
  return {
    id: r.id,
    node_id: r.nodeId,
    credential_id: r.credentialId,
    data: JSON.stringify(r.data),
  };
}

function tunnelValues(r: OnlineTunnelRow): OnlineTunnelsTable {
  return {
    id: r.id,
    session_id: r.sessionId,
    node_id: r.nodeId,
    route_key: r.routeKey,
    pooling: r.pooling ? 1 : 0,
    data: JSON.stringify(r.data),
  };
}

/**
 * The cluster's shared live state: nodes with heartbeats by the database's clock, and the agent
 * sessions and tunnels each node holds. Claims of a route key are serialized across nodes, so
 * two agents on two nodes never both get one name or port.
 * @example
 * const cluster = new ClusterRepository(store.db, store.dialect);
 * await cluster.register({ id: nodeId, role: 'all', linkAddress: '10.0.0.5:7070', startedAt });
 * const claim = await cluster.claimTunnel(row, { takeoverFrom: resumedSessionId });
 * if ('holder' in claim) refuse(claim.holder);
 */
export class ClusterRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
  ) {}

  /** The database's current time, in the form heartbeat_at holds. */
  private now(): RawBuilder<string> {
    return this.dialect === 'postgres'
      ? sql<string>`now()`
      : sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;
  }

  /**
   * Insert or refresh this node (heartbeat_at = now()).
   * @example await cluster.register({ id, role: 'edge', linkAddress: '', startedAt: new Date().toISOString() });
   */
  async register(node: {
    id: string;
    role: string;
    linkAddress: string;
    startedAt: string;
  }): Promise<void> {
    const values = {
      role: node.role,
      link_address: node.linkAddress,
      started_at: node.startedAt,
      heartbeat_at: this.now(),
    };
    await this.db
      .insertInto('nodes')
      .values({ id: node.id, ...values })
      .onConflict((oc) => oc.column('id').doUpdateSet(values))
      .execute();
  }

  /**
   * Refresh the heartbeat; false when the row is gone (another node reaped us): the caller
   * registers again and republishes its state.
   * @example if (!(await cluster.heartbeat(nodeId))) await rejoin();
   */
  async heartbeat(id: string): Promise<boolean> {
    const res = await this.db
      .updateTable('nodes')
      .set({ heartbeat_at: this.now() })
      .where('id', '=', id)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /**
   * Delete nodes whose heartbeat is older than `toleranceMs` (by the database clock), and their
   * sessions and tunnels (cascade); returns their ids. Safe to run concurrently from every node:
   * each row is deleted, and reported, by one of them.
   * @example const gone = await cluster.reapLapsed(15_000);
   */
  async reapLapsed(toleranceMs: number): Promise<string[]> {
    const lapsed =
      this.dialect === 'postgres'
        ? sql<boolean>`heartbeat_at < now() - make_interval(secs => cast(${toleranceMs / 1000} as double precision))`
        : sql<boolean>`julianday(heartbeat_at) < julianday('now') - cast(${toleranceMs} as real) / 86400000.0`;
    const rows = await this.db.deleteFrom('nodes').where(lapsed).returning('id').execute();
    return rows.map((r) => r.id).sort();
  }

  /**
   * A node leaving cleanly: its row, sessions and tunnels go.
   * @example await cluster.unregister(nodeId);
   */
  async unregister(id: string): Promise<void> {
    await this.db.deleteFrom('nodes').where('id', '=', id).execute();
  }

  /**
   * Every node, with the age of its heartbeat.
   * @example const live = (await cluster.nodes()).filter((n) => n.ageMs < 15_000);
   */
  async nodes(): Promise<NodeRow[]> {
    const age =
      this.dialect === 'postgres'
        ? sql<number>`cast(extract(epoch from (now() - heartbeat_at)) * 1000 as double precision)`
        : sql<number>`(julianday('now') - julianday(heartbeat_at)) * 86400000.0`;
    const rows = await this.db
      .selectFrom('nodes')
      .select(['id', 'role', 'link_address', 'started_at', age.as('age_ms')])
      .orderBy('id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      role: r.role,
      linkAddress: r.link_address,
      startedAt: r.started_at,
      // Rounding in julianday arithmetic can make a fresh heartbeat look a hair in the future.
      ageMs: Math.max(0, Math.round(Number(r.age_ms))),
    }));
  }

  /**
   * Record or update an online session; its node's row must exist (a foreign-key violation otherwise).
   * @example await cluster.putSession({ id: 'ts_…', nodeId, credentialId: 'cr_…', data: { ip, os } });
   */
  async putSession(row: OnlineSessionRow): Promise<void> {
    const values = sessionValues(row);
    await this.db
      .insertInto('online_sessions')
      .values(values)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet({
          node_id: values.node_id,
          credential_id: values.credential_id,
          data: values.data,
        }),
      )
      .execute();
  }

  /**
   * Forget a session; its tunnels go with it.
   * @example await cluster.deleteSession('ts_…');
   */
  async deleteSession(id: string): Promise<void> {
    await this.db.deleteFrom('online_sessions').where('id', '=', id).execute();
  }

  /**
   * Record a tunnel, unless its route key is held. Holders that do not block: tunnels of session
   * `takeoverFrom` (a resumed predecessor, possibly on another node, possibly dead) and a tunnel
   * of the same session with the same bind id (`data.bindId`); those rows are deleted in the same
   * transaction. When the new row pools and every other holder pools, it joins them. Otherwise
   * nothing is inserted and the blocking holder is returned. Labeled tunnels (no route key) always
   * insert.
   *
   * Race-free across nodes: on PostgreSQL claims of one key are serialized by a transaction-scoped
   * advisory lock on the key's hash (a collision only serializes two keys needlessly); on SQLite
   * the transaction alone is exclusive.
   * @example
   * const claim = await cluster.claimTunnel(row, { takeoverFrom: predecessorSessionId });
   * if ('holder' in claim) throw conflict(claim.holder);
   */
  async claimTunnel(
    row: OnlineTunnelRow,
    options: { takeoverFrom?: string | undefined } = {},
  ): Promise<ClaimResult> {
    const key = row.routeKey;
    if (key === null) {
      await this.db.insertInto('online_tunnels').values(tunnelValues(row)).execute();
      return { replaced: [] };
    }
    return this.db.transaction().execute(async (trx): Promise<ClaimResult> => {
      await this.lockKeys(trx, [key]);
      // Read after the lock: under READ COMMITTED this statement sees every claim committed
      // before ours got the lock.
      const holders = (
        await trx
          .selectFrom('online_tunnels')
          .selectAll()
          .where('route_key', '=', key)
          .orderBy('id')
          .execute()
      ).map(toTunnel);
      const bindId = row.data.bindId;
      const mine = (h: OnlineTunnelRow): boolean =>
        h.id === row.id ||
        (options.takeoverFrom !== undefined && h.sessionId === options.takeoverFrom) ||
        (h.sessionId === row.sessionId && typeof bindId === 'string' && h.data.bindId === bindId);
      const replaced = holders.filter(mine);
      const others = holders.filter((h) => !mine(h));
      // Pooling joins only when every holder pools too: one that did not asked to be alone.
      const joins = row.pooling && others.every((h) => h.pooling);
      const blocking = others[0];
      if (blocking && !joins) return { holder: blocking };
      if (replaced.length > 0) {
        await trx
          .deleteFrom('online_tunnels')
          .where(
            'id',
            'in',
            replaced.map((r) => r.id),
          )
          .execute();
      }
      await trx.insertInto('online_tunnels').values(tunnelValues(row)).execute();
      return { replaced };
    });
  }

  /**
   * Replace a tunnel's data (its URL or metadata changed); its route key stays.
   * @example await cluster.updateTunnel('tn_…', { ...data, metadata: 'v2' });
   */
  async updateTunnel(id: string, data: Record<string, unknown>): Promise<void> {
    await this.db
      .updateTable('online_tunnels')
      .set({ data: JSON.stringify(data) })
      .where('id', '=', id)
      .execute();
  }

  /**
   * Forget a tunnel.
   * @example await cluster.deleteTunnel('tn_…');
   */
  async deleteTunnel(id: string): Promise<void> {
    await this.db.deleteFrom('online_tunnels').where('id', '=', id).execute();
  }

  /**
   * Everything online in the cluster (optionally excluding one node's rows), read in one snapshot
   * so every tunnel's session is in the list.
   * @example const { sessions, tunnels } = await cluster.online({ exceptNode: nodeId });
   */
  async online(
    options: { exceptNode?: string | undefined } = {},
  ): Promise<{ sessions: OnlineSessionRow[]; tunnels: OnlineTunnelRow[] }> {
    const read = async (trx: Transaction<Database>) => {
      let sessions = trx.selectFrom('online_sessions').selectAll().orderBy('id');
      let tunnels = trx.selectFrom('online_tunnels').selectAll().orderBy('id');
      if (options.exceptNode !== undefined) {
        sessions = sessions.where('node_id', '<>', options.exceptNode);
        tunnels = tunnels.where('node_id', '<>', options.exceptNode);
      }
      return {
        sessions: (await sessions.execute()).map(toSession),
        tunnels: (await tunnels.execute()).map(toTunnel),
      };
    };
    const tx = this.db.transaction();
    return this.dialect === 'postgres'
      ? tx.setIsolationLevel('repeatable read').setAccessMode('read only').execute(read)
      : tx.execute(read);
  }

  /**
   * Replace all of a node's rows at once (after it was reaped while alive, e.g. paused): in one
   * transaction, delete them, then insert `sessions` and `tunnels`. Its own rows are not checked
   * against each other; a tunnel whose route key another node has taken meanwhile is skipped
   * (unless both sides pool), and its id returned, so the caller can close it.
   * @example const { skipped } = await cluster.republish(nodeId, sessions, tunnels);
   */
  async republish(
    nodeId: string,
    sessions: OnlineSessionRow[],
    tunnels: OnlineTunnelRow[],
  ): Promise<{ skipped: string[] }> {
    return this.db.transaction().execute(async (trx) => {
      const keys = [...new Set(tunnels.flatMap((t) => (t.routeKey === null ? [] : [t.routeKey])))];
      await this.lockKeys(trx, keys);
      await trx.deleteFrom('online_tunnels').where('node_id', '=', nodeId).execute();
      await trx.deleteFrom('online_sessions').where('node_id', '=', nodeId).execute();
      for (const part of chunks(sessions)) {
        await trx.insertInto('online_sessions').values(part.map(sessionValues)).execute();
      }
      // Other nodes' holders of the keys, by key: whether each key still pools for everyone.
      const othersPool = new Map<string, boolean>();
      for (const part of chunks(keys)) {
        const rows = await trx
          .selectFrom('online_tunnels')
          .select(['route_key', 'pooling'])
          .where('route_key', 'in', part)
          .where('node_id', '<>', nodeId)
          .execute();
        for (const r of rows) {
          const k = r.route_key!;
          othersPool.set(k, (othersPool.get(k) ?? true) && Number(r.pooling) === 1);
        }
      }
      const skipped: string[] = [];
      const kept: OnlineTunnelRow[] = [];
      for (const t of tunnels) {
        const pools = t.routeKey === null ? undefined : othersPool.get(t.routeKey);
        // Same rule as claimTunnel: a newcomer joins other holders only when all of them pool.
        if (pools === undefined || (pools && t.pooling)) kept.push(t);
        else skipped.push(t.id);
      }
      for (const part of chunks(kept)) {
        await trx.insertInto('online_tunnels').values(part.map(tunnelValues)).execute();
      }
      return { skipped };
    });
  }

  /**
   * Serialize on route keys across nodes until the transaction ends (PostgreSQL). Locks are taken
   * in hash order, so two transactions locking overlapping sets cannot deadlock. SQLite needs
   * none: its write transactions are exclusive.
   */
  private async lockKeys(trx: Transaction<Database>, keys: readonly string[]): Promise<void> {
    if (this.dialect !== 'postgres' || keys.length === 0) return;
    if (keys.length === 1) {
      await sql`select pg_advisory_xact_lock(hashtext(${keys[0]}))`.execute(trx);
      return;
    }
    const { rows } = await sql<{
      h: number;
    }>`select distinct hashtext(k) as h from unnest(cast(${[...keys]} as text[])) as k order by h`.execute(
      trx,
    );
    for (const { h } of rows) await sql`select pg_advisory_xact_lock(${h})`.execute(trx);
  }
}
