import { sql } from 'kysely';
import { ID_PREFIX, newId } from '../src/core/ids.js';
import type { Store } from '../src/store/index.js';
import { nowRfc3339 } from '../src/store/paging.js';
import type { EdgesTable, RefsTable } from '../src/store/schema.js';

/**
 * Fill the store with TCP edges fast: batched multi-row INSERTs straight into the `edges` and
 * `refs` tables in one transaction, bypassing the repository's per-edge checks. Each row is what
 * `EdgeRepository.create` would store for the same input (a backend module with its `refs` row and
 * a traffic policy), so the API reads them exactly like edges created through it.
 */

/** Rows per INSERT: 500 edges x 11 columns stays under both databases' bound-parameter limits. */
const BATCH = 500;

/**
 * Insert `count` TCP edges that use `backendId` and carry `policy`; returns the elapsed milliseconds.
 * @example const ms = await insertTcpEdges(store, 100_000, backend.id, '{"on_tcp_connect":[]}');
 */
export async function insertTcpEdges(
  store: Store,
  count: number,
  backendId: string,
  policy: string,
): Promise<number> {
  const started = performance.now();
  const createdAt = nowRfc3339();
  const backend = JSON.stringify({ enabled: true, backend_id: backendId });
  const trafficPolicy = JSON.stringify({ enabled: true, value: policy });
  await store.db.transaction().execute(async (trx) => {
    for (let done = 0; done < count; done += BATCH) {
      const edges: EdgesTable[] = [];
      const refs: RefsTable[] = [];
      for (let i = done; i < Math.min(count, done + BATCH); i++) {
        const id = newId(ID_PREFIX.tcpEdge);
        edges.push({
          id,
          type: 'tcp',
          description: `bulk edge ${i}`,
          metadata: '{"source": "bench"}',
          created_at: createdAt,
          hostports: null,
          backend,
          ip_restriction: null,
          traffic_policy: trafficPolicy,
          mutual_tls: null,
          tls_termination: null,
        });
        refs.push({ from_id: id, to_id: backendId });
      }
      await trx.insertInto('edges').values(edges).execute();
      await trx.insertInto('refs').values(refs).execute();
    }
  });
  // Fresh statistics, as autovacuum / a long-running server would have them.
  await sql`ANALYZE`.execute(store.db);
  return performance.now() - started;
}

/** The database engine and version, for the report. */
export async function databaseVersion(store: Store): Promise<string> {
  if (store.dialect === 'sqlite') {
    const { rows } = await sql<{ v: string }>`select sqlite_version() as v`.execute(store.db);
    return `SQLite ${rows[0]?.v ?? '?'} (better-sqlite3, WAL)`;
  }
  const { rows } = await sql<{ v: string }>`select current_setting('server_version') as v`.execute(
    store.db,
  );
  return `PostgreSQL ${rows[0]?.v ?? '?'}`;
}
