import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Dashboard users (people, with a password; not bot users), their sign-in sessions and the
 * one-time setup link that creates the first user. Session ids and setup tokens are stored as
 * SHA-256 hashes only, like API keys.
 */
export function usersMigration(dialect: Dialect) {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('users')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', notNull)
        .addColumn('created_at', 'text', notNull)
        .execute();
      await db.schema
        .createTable('user_sessions')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('user_id', idType, (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('created_at', 'text', notNull)
        .addColumn('expires_ms', 'bigint', notNull)
        .execute();
      await db.schema
        .createIndex('user_sessions_user')
        .on('user_sessions')
        .column('user_id')
        .execute();
      await db.schema
        .createTable('user_setup_tokens')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('expires_ms', 'bigint', notNull)
        .execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
