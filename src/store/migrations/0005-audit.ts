import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * The audit trail: one row per change made through the API or dashboard. Rows hold who, what,
 * when and from where, never a body or a token (see src/api/audit-trail.ts).
 */
export function auditMigration(dialect: Dialect) {
  // Byte-wise id order on PostgreSQL too: before_id paging relies on it.
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('audit_events')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('created_at', 'text', notNull)
        .addColumn('operation_id', 'text', notNull)
        .addColumn('actor_type', 'text', notNull)
        .addColumn('actor_id', 'text')
        .addColumn('method', 'text', notNull)
        .addColumn('path', 'text', notNull)
        .addColumn('status_code', 'integer', notNull)
        .addColumn('resource_id', 'text')
        .addColumn('client_ip', 'text', notNull)
        .execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
