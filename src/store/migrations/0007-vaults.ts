import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * Vaults and their secrets, which traffic policies read with `secrets.get('vault', 'name')`.
 * Secret values are stored encrypted (AES-256-GCM under settings.secrets_key); a vault's secrets
 * go with it (ON DELETE CASCADE).
 */
export function vaultsMigration(dialect: Dialect): Migration {
  // resource(): byte-wise id order on PostgreSQL too, which before_id paging relies on.
  const { idType, notNull, unique, cascadesFrom, resource } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await resource(db.schema.createTable('vaults'), { updatedAt: true })
      .addColumn('name', 'text', unique)
      .execute();
    await resource(db.schema.createTable('secrets'), { updatedAt: true })
      .addColumn('vault_id', idType, cascadesFrom('vaults'))
      .addColumn('name', 'text', notNull)
      .addColumn('value_encrypted', 'text', notNull)
      .addUniqueConstraint('secrets_vault_name', ['vault_id', 'name'])
      .execute();
  });
}
