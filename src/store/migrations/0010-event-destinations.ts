import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * Traffic events out (`/event_destinations`, `/event_subscriptions`). A destination is one
 * `kind` (webhook, file, opentelemetry) with its `target` settings as JSON text; a webhook's
 * signing secret is kept encrypted (`secret_encrypted`, as vault secrets are) since Burrow must
 * sign with it again at every delivery. A subscription keeps its event types (`sources`) and the
 * destination ids it sends to as JSON lists: a handful of rows, read whole by the edge.
 */
export function eventDestinationsMigration(dialect: Dialect): Migration {
  const { notNull, resource } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await resource(db.schema.createTable('event_destinations'))
      .addColumn('format', 'text', notNull)
      .addColumn('kind', 'text', notNull)
      .addColumn('target', 'text', notNull)
      .addColumn('secret_encrypted', 'text')
      .execute();
    await resource(db.schema.createTable('event_subscriptions'))
      .addColumn('sources', 'text', notNull)
      .addColumn('destination_ids', 'text', notNull)
      .execute();
  });
}
