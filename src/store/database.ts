import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, type Migration } from 'kysely';
import pg from 'pg';
import { initialMigration } from './migrations/0001-initial.js';
import { certificatesMigration } from './migrations/0002-certificates.js';
import { usersMigration } from './migrations/0003-users.js';
import { endpointsMigration } from './migrations/0004-endpoints.js';
import { auditMigration } from './migrations/0005-audit.js';
import { clusterMigration } from './migrations/0006-cluster.js';
import { vaultsMigration } from './migrations/0007-vaults.js';
import { rolesMigration } from './migrations/0008-roles.js';
import { sshCredentialsMigration } from './migrations/0009-ssh-credentials.js';
import { eventDestinationsMigration } from './migrations/0010-event-destinations.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

/** An open database with its migrations applied. */
export interface Store {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Where the data lives, for messages: a file path or the PostgreSQL URL without password. */
  location: string;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** Empty: SQLite file `burrow.db` in `dataDir`. Otherwise a `postgres://` URL. */
  database: string;
  dataDir: string;
  /**
   * Told about errors of idle PostgreSQL connections (server restart, admin termination). The pool
   * drops such a connection and opens a new one on demand; without a listener they would crash the
   * process.
   */
  onConnectionError?: ((err: Error) => void) | undefined;
}

function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001-initial': initialMigration(dialect),
    '0002-certificates': certificatesMigration(dialect),
    '0003-users': usersMigration(dialect),
    '0004-endpoints': endpointsMigration(dialect),
    '0005-audit': auditMigration(dialect),
    '0006-cluster': clusterMigration(dialect),
    '0007-vaults': vaultsMigration(dialect),
    '0008-roles': rolesMigration(dialect),
    '0009-ssh-credentials': sshCredentialsMigration(dialect),
    '0010-event-destinations': eventDestinationsMigration(dialect),
  };
}

/** Mode of the SQLite files: they hold settings.edge_resumption_secret and every row. */
export const SQLITE_FILE_MODE = 0o600;

/**
 * Create the SQLite file owner-only before SQLite opens it, and tighten an existing one (files made
 * by older versions were 0644). SQLite gives the -wal and -shm files it creates the database
 * file's mode, so tightening the database covers them; ones left over from an earlier run are
 * tightened here too.
 */
function protectSqliteFiles(path: string): void {
  // 'a' creates the file when missing and never truncates; the mode applies only on creation.
  closeSync(openSync(path, 'a', SQLITE_FILE_MODE));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      chmodSync(file, SQLITE_FILE_MODE);
    } catch (err) {
      // Absent: nothing to protect. Owned by another user (a shared deployment): not ours to change,
      // and refusing to start over it would help no one.
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'EPERM') throw err;
    }
  }
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

/**
 * Open the store and bring its schema up to date.
 * @example const store = await openStore({ database: '', dataDir: './burrow-data' });
 */
export async function openStore(options: StoreOptions): Promise<Store> {
  let db: Kysely<Database>;
  let dialect: Dialect;
  let location: string;
  if (options.database) {
    dialect = 'postgres';
    location = redactUrl(options.database);
    const pool = new pg.Pool({ connectionString: options.database, max: 10 });
    const onError =
      options.onConnectionError ??
      ((err: Error) =>
        process.stderr.write(
          `burrow: database connection lost (${err.message}); reconnecting on demand\n`,
        ));
    pool.on('error', onError);
    // The pool listens for errors only on idle clients. A client checked out (inside a transaction,
    // or between Kysely's acquire and its first query) that the server terminates emits 'error'
    // with no listener, which killed the process. Its pending and next queries fail on their own
    // (the caller answers 503) and the pool discards it on release, so here it only needs a listener.
    pool.on('connect', (client) => client.on('error', () => undefined));
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  } else {
    dialect = 'sqlite';
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    location = join(options.dataDir, 'burrow.db');
    protectSqliteFiles(location);
    const sqlite = new SqliteDatabase(location);
    // WAL lets the CLI (api-key create) write while a server runs; NORMAL sync in WAL mode cannot
    // corrupt the file on a crash, it can only lose the last commits on power loss.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  }
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations(dialect) },
  });
  const { error } = await migrator.migrateToLatest();
  if (error) {
    await db.destroy();
    throw new Error(`cannot migrate the database at ${location}: ${(error as Error).message}`);
  }
  return { db, dialect, location, close: () => db.destroy() };
}

/**
 * True when `err` is a foreign-key violation (PostgreSQL or SQLite): a write for a parent row that
 * is gone, e.g. a secret of a deleted vault, a rule of a deleted IP policy.
 * @example if (isForeignKeyViolation(err)) throw unknownVault(vaultId);
 */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/** True when `err` is a unique or primary-key violation, on either database. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  );
}
