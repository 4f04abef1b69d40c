import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Vaults and their secrets, which traffic policies read with `secrets.get('vault', 'name')`.
 * Secret values are stored encrypted (AES-256-GCM under settings.secrets_key); a vault's secrets
 * go with it (ON DELETE CASCADE).
 */
export function vaultsMigration(dialect: Dialect) {
  // Byte-wise id order on PostgreSQL too: before_id paging relies on it.
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('vaults')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('metadata', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('created_at', 'text', notNull)
        .addColumn('updated_at', 'text', notNull)
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .execute();
      await db.schema
        .createTable('secrets')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('metadata', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('created_at', 'text', notNull)
        .addColumn('updated_at', 'text', notNull)
        .addColumn('vault_id', idType, (c) =>
          c.notNull().references('vaults.id').onDelete('cascade'),
        )
        .addColumn('name', 'text', notNull)
        .addColumn('value_encrypted', 'text', notNull)
        .addUniqueConstraint('secrets_vault_name', ['vault_id', 'name'])
        .execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
