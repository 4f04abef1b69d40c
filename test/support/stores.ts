import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { randomDnsLabel } from '../../src/core/ids.js';

/**
 * The databases every store and API test runs against: embedded SQLite, and PostgreSQL (a fresh
 * database per test file, dropped afterwards). `BURROW_TEST_PG` points at the server
 * (default postgres://postgres@127.0.0.1:5432/postgres).
 */
export interface TestDatabase {
  name: 'sqlite' | 'postgres';
  /** What `--database` / `openStore` takes. */
  database: string;
  dataDir: string;
  drop(): Promise<void>;
}

export const PG_ADMIN_URL =
  process.env.BURROW_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export const DATABASE_KINDS = ['sqlite', 'postgres'] as const;

/** Create an empty database of `kind` for one test file or server. */
export async function createTestDatabase(kind: 'sqlite' | 'postgres'): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-test-'));
  if (kind === 'sqlite') {
    return {
      name: kind,
      database: '',
      dataDir,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const dbName = `burrow_test_${randomDnsLabel(12)}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${dbName}`;
  return {
    name: kind,
    database: url.toString(),
    dataDir,
    async drop() {
      rmSync(dataDir, { recursive: true, force: true });
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await c.end();
    },
  };
}
