import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Cloud endpoints (`POST /endpoints`, type `cloud`): a URL the edge serves with no agent, by its
 * traffic policy alone. One row per URL (the unique `url` settles concurrent creates).
 */
export function endpointsMigration(dialect: Dialect) {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('cloud_endpoints')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('url', 'text', (c) => c.notNull().unique())
        .addColumn('traffic_policy', 'text', notNull)
        .addColumn('bindings', 'text', notNull)
        .addColumn('pooling_enabled', 'integer', notNull)
        .addColumn('description', 'text', notNull)
        .addColumn('metadata', 'text', notNull)
        .addColumn('created_at', 'text', notNull)
        .addColumn('updated_at', 'text', notNull)
        .execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
