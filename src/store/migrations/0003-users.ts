import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * Dashboard users (people, with a password; not bot users), their sign-in sessions and the
 * one-time setup link that creates the first user. Session ids and setup tokens are stored as
 * SHA-256 hashes only, like API keys.
 */
export function usersMigration(dialect: Dialect): Migration {
  const { idType, pk, notNull, unique, cascadesFrom, withId, index } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await withId(db.schema.createTable('users'))
      .addColumn('name', 'text', unique)
      .addColumn('password_hash', 'text', notNull)
      .addColumn('created_at', 'text', notNull)
      .execute();
    await db.schema
      .createTable('user_sessions')
      .addColumn('token_hash', 'text', pk)
      .addColumn('user_id', idType, cascadesFrom('users'))
      .addColumn('created_at', 'text', notNull)
      .addColumn('expires_ms', 'bigint', notNull)
      .execute();
    await index(db, 'user_sessions_user', 'user_sessions', ['user_id']);
    await db.schema
      .createTable('user_setup_tokens')
      .addColumn('token_hash', 'text', pk)
      .addColumn('expires_ms', 'bigint', notNull)
      .execute();
  });
}
