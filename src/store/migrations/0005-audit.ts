import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * The audit trail: one row per change made through the API or dashboard. Rows hold who, what,
 * when and from where, never a body or a token (see src/api/audit-trail.ts).
 */
export function auditMigration(dialect: Dialect): Migration {
  // withId: byte-wise id order on PostgreSQL too, which before_id paging relies on.
  const { notNull, withId } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await withId(db.schema.createTable('audit_events'))
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
  });
}
