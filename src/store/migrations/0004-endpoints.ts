import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * Cloud endpoints (`POST /endpoints`, type `cloud`): a URL the edge serves with no agent, by its
 * traffic policy alone. One row per URL (the unique `url` settles concurrent creates).
 */
export function endpointsMigration(dialect: Dialect): Migration {
  const { notNull, unique, withId } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    // Not resource(): here description and metadata come after the endpoint's own columns and
    // have no default.
    await withId(db.schema.createTable('cloud_endpoints'))
      .addColumn('url', 'text', unique)
      .addColumn('traffic_policy', 'text', notNull)
      .addColumn('bindings', 'text', notNull)
      .addColumn('pooling_enabled', 'integer', notNull)
      .addColumn('description', 'text', notNull)
      .addColumn('metadata', 'text', notNull)
      .addColumn('created_at', 'text', notNull)
      .addColumn('updated_at', 'text', notNull)
      .execute();
  });
}
