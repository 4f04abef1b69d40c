import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly } from './schema-kit.js';

/**
 * Roles and scopes (src/api/permissions.ts): a dashboard user's role (`admin` for the users made
 * before roles, who could do everything), the identity a user signed in with through OpenID
 * Connect (`oidc_subject`, `issuer sub`, unique when set), an API key's own narrower role and its
 * scopes (JSON list; null: the owner's role, every resource), and in the audit trail the owner of
 * the key that made a change.
 */
export function rolesMigration(_dialect: Dialect): Migration {
  return forwardOnly(async (db: Kysely<unknown>) => {
    await db.schema
      .alterTable('users')
      .addColumn('role', 'text', (c) => c.notNull().defaultTo('admin'))
      .execute();
    await db.schema.alterTable('users').addColumn('oidc_subject', 'text').execute();
    await db.schema
      .createIndex('users_oidc_subject')
      .unique()
      .on('users')
      .column('oidc_subject')
      .execute();
    await db.schema.alterTable('api_keys').addColumn('role', 'text').execute();
    await db.schema.alterTable('api_keys').addColumn('scopes', 'text').execute();
    await db.schema.alterTable('audit_events').addColumn('actor_owner_id', 'text').execute();
  });
}
