import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { isForeignKeyViolation, isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, type DescribedInput } from './described.js';
import { nowRfc3339, selectPage, type Page, type PageRequest } from './paging.js';
import type { SecretsTable, VaultsTable } from './schema.js';
import type { SettingsRepository } from './settings.js';
import { newSecretKey, openSecret, sealSecret } from './secret-box.js';
import { ResourceRepository } from './resource-repository.js';

/** The largest secret value accepted, in bytes of UTF-8. */
export const SECRET_VALUE_MAX_BYTES = 64 * 1024;

/** A vault: a named group of secrets. */
export type Vault = VaultsTable;

export interface VaultCreate extends DescribedInput {
  name: string;
}

export interface VaultUpdate extends DescribedInput {
  name?: string | undefined;
}

/** A secret as the API shows it: everything but the value, which is write-only. */
export type Secret = Omit<SecretsTable, 'value_encrypted'>;

export interface SecretCreate extends DescribedInput {
  vault_id: string;
  name: string;
  value: string;
}

/** What PATCH may send; `vault_id` only so that sending it is answered with how to move one. */
export interface SecretUpdate extends DescribedInput {
  name?: string | undefined;
  value?: string | undefined;
  vault_id?: unknown;
}

/** One secret in clear, for the edge's in-memory snapshot (never for the API). */
export interface SecretEntry {
  vault: string;
  name: string;
  value: string;
}

function checkName(name: string, what: string): string {
  if (name === '') {
    throw new ValidationError(
      CODES.invalidValue,
      'name',
      `must not be empty: policies name the ${what} with it`,
    );
  }
  return name;
}

/**
 * Vaults. Names are unique, since policies refer to a vault by name (`secrets.get('vault', ...)`).
 * Deleting a vault deletes its secrets.
 * @example const vault = await vaults.create({ name: 'oauth' });
 */
export class VaultRepository extends ResourceRepository<'vaults', Vault> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'vaults', (row) => row);
  }

  async create(input: VaultCreate): Promise<Vault> {
    const described = describedColumns(input);
    const row: VaultsTable = {
      id: newId(ID_PREFIX.vault),
      ...described,
      name: checkName(input.name, 'vault'),
      updated_at: described.created_at,
    };
    try {
      await this.db.insertInto('vaults').values(row).execute();
    } catch (err) {
      throw nameTaken(err, `A vault named ${quote(row.name)} already exists`);
    }
    return row;
  }

  async update(id: string, patch: VaultUpdate): Promise<Vault | undefined> {
    const set: Partial<VaultsTable> = describedChanges(patch);
    if (patch.name !== undefined) set.name = checkName(patch.name, 'vault');
    if (Object.keys(set).length > 0) set.updated_at = nowRfc3339();
    await this.writeColumns(id, set, (err) =>
      nameTaken(err, `A vault named ${quote(set.name ?? '')} already exists`),
    );
    return this.get(id);
  }

  /** Delete the vault and its secrets; false when absent. */
  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      // The foreign key cascades too; this keeps that true on a connection without foreign keys.
      await trx.deleteFrom('secrets').where('vault_id', '=', id).execute();
    });
  }
}

/**
 * Secrets of vaults. Values are write-only: they are encrypted before they are stored
 * (secret-box.ts) and only {@link SecretRepository.entries} decrypts them, for the edge.
 * @example await secrets.create({ vault_id: 'vault_...', name: 'client_secret', value: 's3cr3t' });
 */
export class SecretRepository extends ResourceRepository<'secrets', Secret, Secret> {
  private readonly settings: SettingsRepository;
  private key: Promise<string> | undefined;

  constructor(deps: RepoDeps) {
    super(deps.db, 'secrets', (row) => row, SECRET_COLUMNS);
    this.settings = deps.accountSettings;
  }

  /** The encryption key, made on first use; concurrent first users agree on one. */
  private secretsKey(): Promise<string> {
    if (!this.key) {
      const key = this.settings.getOrCreate('secrets_key', newSecretKey);
      // A failed read (database down) is tried again by the next caller.
      key.catch(() => (this.key = undefined));
      this.key = key;
    }
    return this.key;
  }

  async create(input: SecretCreate): Promise<Secret> {
    const name = checkName(input.name, 'secret');
    // Checked before the key is read: a refused create stores nothing, not even a new key.
    const vault = await this.db
      .selectFrom('vaults')
      .select('id')
      .where('id', '=', input.vault_id)
      .executeTakeFirst();
    if (!vault) throw unknownVault(input.vault_id);
    const described = describedColumns(input);
    const id = newId(ID_PREFIX.secret);
    const row: SecretsTable = {
      id,
      ...described,
      vault_id: input.vault_id,
      name,
      value_encrypted: sealSecret(await this.secretsKey(), id, input.value),
      updated_at: described.created_at,
    };
    try {
      await this.db.insertInto('secrets').values(row).execute();
    } catch (err) {
      if (isForeignKeyViolation(err)) throw unknownVault(input.vault_id);
      throw nameTaken(
        err,
        `The vault ${row.vault_id} already has a secret named ${quote(row.name)}`,
      );
    }
    return withoutValue(row);
  }

  /** The secrets of one vault, newest first. */
  async listOfVault(vaultId: string, page: PageRequest): Promise<Page<Secret>> {
    return selectPage(
      this.db.selectFrom('secrets').select(SECRET_COLUMNS).where('vault_id', '=', vaultId),
      page,
    );
  }

  async update(id: string, patch: SecretUpdate): Promise<Secret | undefined> {
    if (patch.vault_id !== undefined) {
      throw new ValidationError(
        CODES.invalidValue,
        'vault_id',
        'a secret cannot move to another vault. Create it in that vault and delete this one.',
      );
    }
    const set: Partial<SecretsTable> = describedChanges(patch);
    if (patch.name !== undefined) set.name = checkName(patch.name, 'secret');
    if (patch.value !== undefined) {
      // A PATCH of a missing secret must not create the key either.
      if (!(await this.get(id))) return undefined;
      set.value_encrypted = sealSecret(await this.secretsKey(), id, patch.value);
    }
    if (Object.keys(set).length > 0) set.updated_at = nowRfc3339();
    await this.writeColumns(id, set, (err) =>
      nameTaken(err, `The vault already has a secret named ${quote(set.name ?? '')}`),
    );
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  /**
   * Every secret in clear with its vault's name: what the edge loads into its resolver. Never
   * hand these to the API or a log.
   */
  async entries(): Promise<SecretEntry[]> {
    const rows = await this.db
      .selectFrom('secrets')
      .innerJoin('vaults', 'vaults.id', 'secrets.vault_id')
      .select([
        'secrets.id as id',
        'secrets.name as name',
        'secrets.value_encrypted as sealed',
        'vaults.name as vault',
      ])
      .orderBy('secrets.id')
      .execute();
    if (rows.length === 0) return [];
    const key = await this.secretsKey();
    return rows.map((r) => ({
      vault: r.vault,
      name: r.name,
      value: openSecret(key, r.id, r.sealed),
    }));
  }
}

const SECRET_COLUMNS = [
  'id',
  'description',
  'metadata',
  'created_at',
  'updated_at',
  'vault_id',
  'name',
] as const;

function withoutValue(row: SecretsTable): Secret {
  const { value_encrypted: _sealed, ...rest } = row;
  return rest;
}

function unknownVault(id: string): ValidationError {
  return new ValidationError(
    CODES.invalidReference,
    'vault_id',
    `no vault has the id ${quote(id)}. Create the vault first (POST /vaults) or use the id of an existing one.`,
  );
}

function nameTaken(err: unknown, message: string): unknown {
  if (!isUniqueViolation(err)) return err;
  return new ConflictError(
    CODES.nameTaken,
    `${message}; names must be unique, so choose another name.`,
  );
}
