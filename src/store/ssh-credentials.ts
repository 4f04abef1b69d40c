import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { parseSshPublicKey, SshKeyProblem, type SshPublicKey } from '../core/ssh-public-key.js';
import { normalizeAcl, type AuthenticatedCredential } from './credentials.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, describedOf } from './described.js';
import { resolveOwner } from './owners.js';
import { ResourceRepository } from './resource-repository.js';
import type { SshCredentialsTable } from './schema.js';

/** An SSH credential: a public key that may open tunnels with `ssh -R`, with a bind ACL. */
export interface SshCredential {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  /** `<type> <base64>` (the comment of the line given is not kept). */
  public_key: string;
  /** `SHA256:…`, as `ssh-keygen -lf` prints it. */
  fingerprint: string;
  acl: string[];
  owner_id: string;
}

export interface SshCredentialCreate {
  public_key: string;
  description?: string | undefined;
  metadata?: string | undefined;
  acl?: readonly string[] | undefined;
  owner_id?: string | undefined;
}

export type SshCredentialUpdate = Pick<SshCredentialCreate, 'description' | 'metadata' | 'acl'>;

function toSshCredential(row: SshCredentialsTable): SshCredential {
  return {
    id: row.id,
    ...describedOf(row),
    public_key: row.public_key,
    fingerprint: row.fingerprint,
    acl: JSON.parse(row.acl) as string[],
    owner_id: row.owner_id,
  };
}

/**
 * Read `text` as an accepted public key, or a 400 naming `public_key` and what is wrong.
 * @example checkedPublicKey('ssh-rsa AAAA…(1024 bits)') // throws: an RSA key of 1024 bits is too weak…
 */
export function checkedPublicKey(text: string): SshPublicKey {
  try {
    return parseSshPublicKey(text);
  } catch (err) {
    if (!(err instanceof SshKeyProblem)) throw err;
    throw new ValidationError(CODES.sshKeyInvalid, 'public_key', err.message, { cause: err });
  }
}

/**
 * SSH public keys that open tunnels through the SSH listener (src/edge/ssh). Like authtokens
 * (credentials.ts): an owner (the account or a bot user) and a bind ACL of the same rules; a
 * deleted credential or a deactivated owner stops serving (`standing`). The key itself is public,
 * so it is stored as given; its fingerprint is unique and is how `authenticate` finds it.
 * @example await sshCredentials.create({ public_key: readFileSync('id_ed25519.pub', 'utf8'), acl: ['bind:*.example.com'] });
 */
export class SshCredentialRepository extends ResourceRepository<'ssh_credentials', SshCredential> {
  constructor(private readonly deps: RepoDeps) {
    super(deps.db, 'ssh_credentials', toSshCredential);
  }

  async create(input: SshCredentialCreate): Promise<SshCredential> {
    const key = checkedPublicKey(input.public_key);
    const acl = normalizeAcl(input.acl ?? []);
    const ownerId = await resolveOwner(this.deps.db, this.deps.accountSettings, input.owner_id);
    const row: SshCredentialsTable = {
      id: newId(ID_PREFIX.sshCredential),
      ...describedColumns(input),
      owner_id: ownerId,
      acl: JSON.stringify(acl),
      public_key: key.line,
      fingerprint: key.fingerprint,
    };
    try {
      await this.deps.db.insertInto('ssh_credentials').values(row).execute();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      throw new ConflictError(
        CODES.sshKeyTaken,
        `The public key ${key.fingerprint} is already an SSH credential; update or delete that one.`,
      );
    }
    return toSshCredential(row);
  }

  /** Change the fields given; `acl`, when given, replaces the whole list. The key never changes. */
  async update(id: string, patch: SshCredentialUpdate): Promise<SshCredential | undefined> {
    const set: Partial<SshCredentialsTable> = describedChanges(patch);
    if (patch.acl !== undefined) set.acl = JSON.stringify(normalizeAcl(patch.acl));
    await this.writeColumns(id, set);
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  /**
   * The credential of the key with this fingerprint, as the SSH listener needs it, or undefined.
   * The caller has checked that the client holds the private key (its signature).
   */
  async authenticate(fingerprint: string): Promise<AuthenticatedCredential | undefined> {
    const row = await this.deps.db
      .selectFrom('ssh_credentials')
      .select(['id', 'acl', 'owner_id'])
      .where('fingerprint', '=', fingerprint)
      .executeTakeFirst();
    if (!row) return undefined;
    const standing = await this.standing([row.id]);
    return {
      credential: { id: row.id, acl: JSON.parse(row.acl) as string[], owner_id: row.owner_id },
      ownerActive: standing.get(row.id) === 'ok',
    };
  }

  /**
   * Of `ids`, which SSH credentials may still serve: present ('ok'), owned by a deactivated or
   * deleted bot user ('inactive'); missing ids are deleted. One query, as credentials.standing.
   */
  async standing(ids: readonly string[]): Promise<Map<string, 'ok' | 'inactive'>> {
    const out = new Map<string, 'ok' | 'inactive'>();
    if (ids.length === 0) return out;
    const rows = await this.deps.db
      .selectFrom('ssh_credentials')
      .leftJoin('bot_users', 'bot_users.id', 'ssh_credentials.owner_id')
      .select([
        'ssh_credentials.id as id',
        'ssh_credentials.owner_id as owner_id',
        'bot_users.active',
      ])
      .where('ssh_credentials.id', 'in', [...ids])
      .execute();
    for (const row of rows) {
      const bot = row.owner_id.startsWith(`${ID_PREFIX.botUser}_`);
      out.set(row.id, !bot || row.active === 1 ? 'ok' : 'inactive');
    }
    return out;
  }
}
