import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * The cluster's shared live state: the server processes (nodes) on this store, with a heartbeat
 * by the database's clock, and the agent sessions and tunnels each node holds, so any node can
 * list and route to every agent. A node's rows go with it (ON DELETE CASCADE) when it leaves or
 * is reaped.
 */
export function clusterMigration(dialect: Dialect): Migration {
  const { idType, notNull, cascadesFrom, withId, index } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    const nodes = withId(db.schema.createTable('nodes'))
      .addColumn('role', 'text', notNull)
      .addColumn('link_address', 'text', notNull)
      .addColumn('started_at', 'text', notNull);
    // Heartbeats are compared by the database's clock only (now()), so nodes' clock skew does not
    // matter. SQLite has no timestamp type: there it is RFC 3339 text from SQLite's clock.
    await (
      dialect === 'postgres'
        ? nodes.addColumn('heartbeat_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
        : nodes.addColumn('heartbeat_at', 'text', (c) =>
            c.notNull().defaultTo(sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`),
          )
    ).execute();

    await withId(db.schema.createTable('online_sessions'))
      .addColumn('node_id', idType, cascadesFrom('nodes'))
      .addColumn('credential_id', 'text', notNull)
      .addColumn('data', 'text', notNull)
      .execute();
    // Cascades from nodes look sessions up by node.
    await index(db, 'online_sessions_node', 'online_sessions', ['node_id']);

    await withId(db.schema.createTable('online_tunnels'))
      .addColumn('session_id', idType, cascadesFrom('online_sessions'))
      .addColumn('node_id', idType, cascadesFrom('nodes'))
      // Not unique: pooling tunnels share a key. NULL for labeled tunnels, which never conflict.
      .addColumn('route_key', 'text')
      // Integer 0/1 on both databases, like every other flag in the schema.
      .addColumn('pooling', 'integer', notNull)
      .addColumn('data', 'text', notNull)
      .execute();
    await index(db, 'online_tunnels_route_key', 'online_tunnels', ['route_key']);
    await index(db, 'online_tunnels_node', 'online_tunnels', ['node_id']);
    await index(db, 'online_tunnels_session', 'online_tunnels', ['session_id']);
  });
}
