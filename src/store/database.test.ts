import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openStore } from './database.js';
import { createTestDatabase, PG_ADMIN_URL } from '../../test/support/stores.js';

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

describe('openStore on SQLite', () => {
  const mode = (path: string) => statSync(path).mode & 0o777;

  it('creates the database and its -wal and -shm files owner-only (0600)', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'burrow-mode-')), 'data');
    const previous = process.umask(0o022);
    try {
      const store = await openStore({ database: '', dataDir });
      try {
        // A write, so that the WAL and its index exist while the store is open.
        await store.db.insertInto('settings').values({ key: 'mode-test', value: 'x' }).execute();
        expect(mode(dataDir)).toBe(0o700);
        for (const file of ['burrow.db', 'burrow.db-wal', 'burrow.db-shm']) {
          expect(mode(join(dataDir, file)), file).toBe(0o600);
        }
      } finally {
        await store.close();
      }
    } finally {
      process.umask(previous);
      rmSync(join(dataDir, '..'), { recursive: true, force: true });
    }
  });

  it('tightens files an older version left readable by others', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-mode-'));
    try {
      const first = await openStore({ database: '', dataDir });
      await first.db.insertInto('settings').values({ key: 'kept', value: 'yes' }).execute();
      await first.close();
      const db = join(dataDir, 'burrow.db');
      chmodSync(db, 0o644);
      writeFileSync(`${db}-shm`, '');
      chmodSync(`${db}-shm`, 0o644);
      const store = await openStore({ database: '', dataDir });
      try {
        expect(mode(db)).toBe(0o600);
        expect(mode(`${db}-shm`)).toBe(0o600);
        const rows = await store.db.selectFrom('settings').selectAll().execute();
        expect(rows).toContainEqual({ key: 'kept', value: 'yes' });
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
