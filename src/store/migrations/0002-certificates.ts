import { sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * Certificates in the store: uploaded and ACME-issued ones (`tls_certificates`), the ACME
 * challenges being answered (shared by every process on the store, since the CA may ask any of
 * them), leases so that one process orders a name at a time, and the certificate a reserved domain
 * serves.
 */
export function certificatesMigration(dialect: Dialect) {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('tls_certificates')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('metadata', 'text', (c) => c.notNull().defaultTo(''))
        .addColumn('created_at', 'text', notNull)
        .addColumn('certificate_pem', 'text', notNull)
        .addColumn('private_key_pem', 'text', notNull)
        .addColumn('private_key_type', 'text', notNull)
        .addColumn('subject_common_name', 'text', notNull)
        .addColumn('dns_names', 'text', notNull)
        .addColumn('ips', 'text', notNull)
        .addColumn('issuer_common_name', 'text', notNull)
        .addColumn('serial_number', 'text', notNull)
        .addColumn('not_before', 'text', notNull)
        .addColumn('not_after', 'text', notNull)
        .addColumn('managed_by', 'text')
        .execute();
      await db.schema
        .createTable('acme_challenges')
        .addColumn('id', idType, (c) => c.primaryKey())
        .addColumn('kind', 'text', notNull)
        .addColumn('name', 'text', notNull)
        .addColumn('value', 'text', notNull)
        .addColumn('expires_ms', 'bigint', notNull)
        .execute();
      await db.schema
        .createIndex('acme_challenges_lookup')
        .on('acme_challenges')
        .columns(['kind', 'name'])
        .execute();
      await db.schema
        .createTable('acme_leases')
        .addColumn('subject', 'text', (c) => c.primaryKey())
        .addColumn('holder', 'text', notNull)
        .addColumn('expires_ms', 'bigint', notNull)
        .execute();
      await db.schema.alterTable('reserved_domains').addColumn('certificate_id', 'text').execute();
    },
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
