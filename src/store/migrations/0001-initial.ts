import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * The first schema. Ids are compared byte-wise (COLLATE "C" on PostgreSQL; SQLite's default), so
 * `ORDER BY id` is creation order on both databases.
 */
export function initialMigration(dialect: Dialect): Migration {
  const { idType, pk, notNull, unique, cascadesFrom, withId, resource, index } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await db.schema
      .createTable('settings')
      .addColumn('key', 'text', pk)
      .addColumn('value', 'text', notNull)
      .execute();
    await resource(db.schema.createTable('api_keys'))
      .addColumn('owner_id', idType, notNull)
      .addColumn('token_hash', 'text', notNull)
      .execute();
    await withId(db.schema.createTable('bot_users'))
      .addColumn('name', 'text', unique)
      .addColumn('active', 'integer', notNull)
      .addColumn('created_at', 'text', notNull)
      .execute();
    await resource(db.schema.createTable('credentials'))
      .addColumn('owner_id', idType, notNull)
      .addColumn('acl', 'text', notNull)
      .addColumn('token_hash', 'text', notNull)
      .execute();
    await index(db, 'credentials_owner', 'credentials', ['owner_id']);
    await resource(db.schema.createTable('reserved_domains'))
      .addColumn('domain', 'text', unique)
      .addColumn('region', 'text', notNull)
      .addColumn('cname_target', 'text')
      .addColumn('acme_challenge_cname_target', 'text')
      .addColumn('certificate_management_policy', 'text')
      .addColumn('certificate_management_status', 'text')
      .execute();
    await resource(db.schema.createTable('reserved_addrs'))
      .addColumn('addr', 'text', unique)
      .addColumn('port', 'integer', unique)
      .addColumn('region', 'text', notNull)
      .execute();
    await resource(db.schema.createTable('ip_policies')).execute();
    await resource(db.schema.createTable('ip_policy_rules'))
      .addColumn('ip_policy_id', idType, cascadesFrom('ip_policies'))
      .addColumn('cidr', 'text', notNull)
      .addColumn('action', 'text', notNull)
      .addUniqueConstraint('ip_policy_rules_cidr', ['ip_policy_id', 'cidr'])
      .execute();
    await resource(db.schema.createTable('backends'))
      .addColumn('type', 'text', notNull)
      .addColumn('config', 'text', notNull)
      .execute();
    await index(db, 'backends_type', 'backends', ['type', 'id']);
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
    await index(db, 'edges_type', 'edges', ['type', 'id']);
    await db.schema
      .createTable('edge_hostports')
      .addColumn('hostport', 'text', pk)
      .addColumn('edge_id', idType, cascadesFrom('edges'))
      .addColumn('target_id', idType, notNull)
      .execute();
    await index(db, 'edge_hostports_edge', 'edge_hostports', ['edge_id']);
    await index(db, 'edge_hostports_target', 'edge_hostports', ['target_id']);
    await db.schema
      .createTable('refs')
      .addColumn('from_id', idType, notNull)
      .addColumn('to_id', idType, notNull)
      .addPrimaryKeyConstraint('refs_pk', ['from_id', 'to_id'])
      .execute();
    await index(db, 'refs_to', 'refs', ['to_id']);
  });
}
