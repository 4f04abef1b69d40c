import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { forwardOnly, schemaKit } from './schema-kit.js';

/**
 * SSH credentials (`/ssh_credentials`): a public key that may open tunnels with `ssh -R`, owned
 * by the account or a bot user, with the bind ACL authtokens have. `public_key` is the OpenSSH
 * line as normalised (type and base64 blob); `fingerprint` (`SHA256:…`, unique) is how the SSH
 * listener finds the key a client offers.
 */
export function sshCredentialsMigration(dialect: Dialect): Migration {
  const { idType, notNull, unique, resource, index } = schemaKit(dialect);
  return forwardOnly(async (db: Kysely<unknown>) => {
    await resource(db.schema.createTable('ssh_credentials'))
      .addColumn('owner_id', idType, notNull)
      .addColumn('acl', 'text', notNull)
      .addColumn('public_key', 'text', notNull)
      .addColumn('fingerprint', 'text', unique)
      .execute();
    await index(db, 'ssh_credentials_owner', 'ssh_credentials', ['owner_id']);
  });
}
