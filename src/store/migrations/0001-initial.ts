import { sql, type Kysely, type ColumnDefinitionBuilder, type CreateTableBuilder } from 'kysely';
import type { Dialect } from '../database.js';

type Table = CreateTableBuilder<string, never>;

/**
 * The first schema. Ids are compared byte-wise (COLLATE "C" on PostgreSQL; SQLite's default), so
 * `ORDER BY id` is creation order on both databases.
 */
export function initialMigration(dialect: Dialect) {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const pk = (c: ColumnDefinitionBuilder) => c.primaryKey();
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  const resource = (t: Table): Table =>
    t
      .addColumn('id', idType, pk)
      .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('metadata', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('created_at', 'text', notNull);

  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', pk)
        .addColumn('value', 'text', notNull)
        .execute();
      await resource(db.schema.createTable('api_keys'))
        .addColumn('owner_id', idType, notNull)
        .addColumn('token_hash', 'text', notNull)
        .execute();
      await db.schema
        .createTable('bot_users')
        .addColumn('id', idType, pk)
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('active', 'integer', notNull)
        .addColumn('created_at', 'text', notNull)
        .execute();
      await resource(db.schema.createTable('credentials'))
        .addColumn('owner_id', idType, notNull)
        .addColumn('acl', 'text', notNull)
        .addColumn('token_hash', 'text', notNull)
        .execute();
      await db.schema
        .createIndex('credentials_owner')
        .on('credentials')
        .column('owner_id')
        .execute();
      await resource(db.schema.createTable('reserved_domains'))
        .addColumn('domain', 'text', (c) => c.notNull().unique())
        .addColumn('region', 'text', notNull)
        .addColumn('cname_target', 'text')
        .addColumn('acme_challenge_cname_target', 'text')
        .addColumn('certificate_management_policy', 'text')
        .addColumn('certificate_management_status', 'text')
        .execute();
      await resource(db.schema.createTable('reserved_addrs'))
        .addColumn('addr', 'text', (c) => c.notNull().unique())
        .addColumn('port', 'integer', (c) => c.notNull().unique())
        .addColumn('region', 'text', notNull)
        .execute();
      await resource(db.schema.createTable('ip_policies')).execute();
      await resource(db.schema.createTable('ip_policy_rules'))
        .addColumn('ip_policy_id', idType, (c) =>
          c.notNull().references('ip_policies.id').onDelete('cascade'),
        )
        .addColumn('cidr', 'text', notNull)
        .addColumn('action', 'text', notNull)
        .addUniqueConstraint('ip_policy_rules_cidr', ['ip_policy_id', 'cidr'])
        .execute();
      await resource(db.schema.createTable('backends'))
        .addColumn('type', 'text', notNull)
        .addColumn('config', 'text', notNull)
        .execute();
      await db.schema.createIndex('backends_type').on('backends').columns(['type', 'id']).execute();
      await resource(db.schema.createTable('certificate_authorities'))
        .addColumn('ca_pem', 'text', notNull)
        .addColumn('subject_common_name', 'text', notNull)
        .addColumn('not_before', 'text', notNull)
        .addColumn('not_after', 'text', notNull)
        .addColumn('key_usages', 'text', notNull)
        .addColumn('extended_key_usages', 'text', notNull)
        .execute();
      await resource(db.schema.createTable('edges'))
        .addColumn('type', 'text', notNull)
        .addColumn('hostports', 'text')
        .addColumn('backend', 'text')
        .addColumn('ip_restriction', 'text')
        .addColumn('traffic_policy', 'text')
        .addColumn('mutual_tls', 'text')
        .addColumn('tls_termination', 'text')
        .execute();
      await db.schema.createIndex('edges_type').on('edges').columns(['type', 'id']).execute();
      await db.schema
        .createTable('edge_hostports')
        .addColumn('hostport', 'text', pk)
        .addColumn('edge_id', idType, (c) => c.notNull().references('edges.id').onDelete('cascade'))
        .addColumn('target_id', idType, notNull)
        .execute();
      await db.schema
        .createIndex('edge_hostports_edge')
        .on('edge_hostports')
        .column('edge_id')
        .execute();
      await db.schema
        .createIndex('edge_hostports_target')
        .on('edge_hostports')
        .column('target_id')
        .execute();
      await db.schema
        .createTable('refs')
        .addColumn('from_id', idType, notNull)
        .addColumn('to_id', idType, notNull)
        .addPrimaryKeyConstraint('refs_pk', ['from_id', 'to_id'])
        .execute();
      await db.schema.createIndex('refs_to').on('refs').column('to_id').execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
