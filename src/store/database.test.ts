import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from './database.js';
import { createTestDatabase, PG_ADMIN_URL } from '../test-support/stores.js';

describe('openStore on PostgreSQL', () => {
  it('survives the server terminating its idle connections, and reconnects on demand', async () => {
    const db = await createTestDatabase('postgres');
    const errors: Error[] = [];
    const store = await openStore({
      database: db.database,
      dataDir: db.dataDir,
      onConnectionError: (e) => errors.push(e),
    });
    try {
      await store.db.selectFrom('settings').selectAll().execute();
      const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
      await admin.connect();
      const name = new URL(db.database).pathname.slice(1);
      await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [name],
      );
      await admin.end();
      await new Promise((r) => setTimeout(r, 200));
      expect(errors.length).toBeGreaterThan(0);
      const rows = await store.db.selectFrom('settings').selectAll().execute();
      expect(Array.isArray(rows)).toBe(true);
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
