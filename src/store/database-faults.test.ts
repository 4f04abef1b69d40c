import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from './database.js';
import { createTestDatabase, PG_ADMIN_URL } from '../../test/support/stores.js';

describe('openStore on PostgreSQL, connection terminated while checked out', () => {
  it('fails the transaction instead of crashing the process, and serves the next query', async () => {
    const db = await createTestDatabase('postgres');
    const store = await openStore({
      database: db.database,
      dataDir: db.dataDir,
      onConnectionError: () => undefined,
    });
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    // Without a listener on checked-out clients, the 'error' event is unhandled: vitest reports
    // it (and a real server process exits).
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('uncaughtException', onUnhandled);
    try {
      const name = new URL(db.database).pathname.slice(1);
      const inTransaction = store.db.transaction().execute(async (trx) => {
        await trx.selectFrom('settings').selectAll().execute();
        // The connection is held, between queries, when the server terminates it.
        await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [name],
        );
        await new Promise((r) => setTimeout(r, 200));
        await trx.selectFrom('settings').selectAll().execute();
      });
      await expect(inTransaction).rejects.toThrow();
      expect(unhandled).toEqual([]);
      const rows = await store.db.selectFrom('settings').selectAll().execute();
      expect(Array.isArray(rows)).toBe(true);
    } finally {
      process.off('uncaughtException', onUnhandled);
      await admin.end();
      await store.close();
      await db.drop();
    }
  });
});
