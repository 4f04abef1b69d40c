import { BurrowError, CODES } from '../core/errors.js';

/** PostgreSQL SQLSTATEs that mean "the database is away for now", not "your request is wrong". */
const PG_UNAVAILABLE = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, server stop)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, recovering)
  '53300', // too_many_connections
  '08000',
  '08003',
  '08006', // connection exceptions
]);
const PG_FULL = new Set(['53100']); // disk_full

/** Node socket errors of a lost or refused database connection. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/**
 * The 503 for an error of the store that a retry later can cure (disk full, database restarting
 * or its connection cut), or undefined for any other error. Without this they were 500s: a
 * client could not tell "try again" from "bug", and the message gave the operator nothing.
 * @example storeError(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }))?.statusCode // 503
 */
export function storeError(err: unknown): BurrowError | undefined {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (code === 'SQLITE_FULL' || PG_FULL.has(code)) {
    return new BurrowError(
      CODES.storeFull,
      503,
      'The server cannot save changes: its data disk is full. Nothing was changed; retry once the operator has freed space.',
    );
  }
  if (
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_BUSY') ||
    code === 'SQLITE_CANTOPEN' ||
    PG_UNAVAILABLE.has(code) ||
    SOCKET_CODES.has(code) ||
    // node-postgres's own words for a connection it lost, which carry no code.
    /^Connection terminated|is not queryable$/.test(message)
  ) {
    return new BurrowError(
      CODES.storeUnavailable,
      503,
      'The server cannot reach its database right now. Retry in a moment.',
    );
  }
  return undefined;
}
