import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * The cluster's shared live state: the server processes (nodes) on this store, with a heartbeat
 * by the database's clock, and the agent sessions and tunnels each node holds, so any node can
 * list and route to every agent. A node's rows go with it (ON DELETE CASCADE) when it leaves or
 * is reaped.
 */
export function clusterMigration(dialect: Dialect) {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const nodes = db.schema
        .createTable('nodes')
        .addColumn('id', idType, (c) => c.primaryKey())
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

      await db.schema
        .createTable('online_sessions')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('node_id', idType, (c) => c.notNull().references('nodes.id').onDelete('cascade'))
        .addColumn('credential_id', 'text', notNull)
        .addColumn('data', 'text', notNull)
        .execute();
      // Cascades from nodes look sessions up by node.
      await db.schema
        .createIndex('online_sessions_node')
        .on('online_sessions')
        .column('node_id')
        .execute();

      await db.schema
        .createTable('online_tunnels')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('session_id', idType, (c) =>
          c.notNull().references('online_sessions.id').onDelete('cascade'),
        )
        .addColumn('node_id', idType, (c) => c.notNull().references('nodes.id').onDelete('cascade'))
        // Not unique: pooling tunnels share a key. NULL for labeled tunnels, which never conflict.
        .addColumn('route_key', 'text')
        // Integer 0/1 on both databases, like every other flag in the schema.
        .addColumn('pooling', 'integer', notNull)
        .addColumn('data', 'text', notNull)
        .execute();
      await db.schema
        .createIndex('online_tunnels_route_key')
        .on('online_tunnels')
        .column('route_key')
        .execute();
      await db.schema
        .createIndex('online_tunnels_node')
        .on('online_tunnels')
        .column('node_id')
        .execute();
      await db.schema
        .createIndex('online_tunnels_session')
        .on('online_tunnels')
        .column('session_id')
        .execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
