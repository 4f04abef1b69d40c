import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * Certificates in the store: uploaded and ACME-issued ones (`tls_certificates`), the ACME
 * challenges being answered (shared by every process on the store, since the CA may ask any of
 * them), leases so that one process orders a name at a time, and the certificate a reserved domain
 * serves.
 */
export function certificatesMigration(dialect: Dialect): Migration {
  const { pk, notNull, withId, resource, index } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await resource(db.schema.createTable('tls_certificates'))
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
    await withId(db.schema.createTable('acme_challenges'))
      .addColumn('kind', 'text', notNull)
      .addColumn('name', 'text', notNull)
      .addColumn('value', 'text', notNull)
      .addColumn('expires_ms', 'bigint', notNull)
      .execute();
    await index(db, 'acme_challenges_lookup', 'acme_challenges', ['kind', 'name']);
    await db.schema
      .createTable('acme_leases')
      .addColumn('subject', 'text', pk)
      .addColumn('holder', 'text', notNull)
      .addColumn('expires_ms', 'bigint', notNull)
      .execute();
    await db.schema.alterTable('reserved_domains').addColumn('certificate_id', 'text').execute();
  });
}
