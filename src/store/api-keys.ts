import type { Kysely } from 'kysely';
import { ID_PREFIX, newId } from '../core/ids.js';
import { issueToken, tokenIdBody, tokenMatches } from '../core/tokens.js';
import { resolveOwner } from './owners.js';
import { describedChanges, describedColumns, describedOf } from './described.js';
import { countRows, ResourceRepository } from './resource-repository.js';
import type { ApiKeysTable, Database } from './schema.js';
import type { SettingsRepository } from './settings.js';

/** An API key. `token` is the secret, present only in the reply that created it. */
export interface ApiKey {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  owner_id: string;
  token: string | null;
}

export interface ApiKeyCreate {
  description?: string | undefined;
  metadata?: string | undefined;
  owner_id?: string | undefined;
}

export type ApiKeyUpdate = Pick<ApiKeyCreate, 'description' | 'metadata'>;

type ApiKeyRow = Omit<ApiKeysTable, 'token_hash'>;

function toApiKey(row: ApiKeyRow, token: string | null = null): ApiKey {
  return {
    id: row.id,
    ...describedOf(row),
    owner_id: row.owner_id,
    token,
  };
}

const COLUMNS = ['id', 'description', 'metadata', 'created_at', 'owner_id'] as const;

/**
 * API keys, stored as SHA-256 hashes; the token is returned once, by `create`.
 * @example const { token } = await apiKeys.create({ description: 'ci' });
 */
export class ApiKeyRepository extends ResourceRepository<'api_keys', ApiKey, ApiKeyRow> {
  constructor(
    db: Kysely<Database>,
    private readonly settings: SettingsRepository,
  ) {
    super(db, 'api_keys', (row) => toApiKey(row), COLUMNS);
  }

  async create(input: ApiKeyCreate): Promise<ApiKey> {
    const id = newId(ID_PREFIX.apiKey);
    const { token, hash } = issueToken(id);
    const row: ApiKeysTable = {
      id,
      ...describedColumns(input),
      owner_id: await resolveOwner(this.db, this.settings, input.owner_id),
      token_hash: hash,
    };
    await this.db.insertInto('api_keys').values(row).execute();
    return toApiKey(row, token);
  }

  async update(id: string, patch: ApiKeyUpdate): Promise<ApiKey | undefined> {
    await this.writeColumns(id, describedChanges(patch));
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  async count(): Promise<number> {
    return countRows(this.db, 'api_keys');
  }

  /** The key a presented token belongs to, or undefined; compares hashes in constant time. */
  async verify(token: string): Promise<{ id: string; owner_id: string } | undefined> {
    const body = tokenIdBody(token);
    if (!body) return undefined;
    const row = await this.db
      .selectFrom('api_keys')
      .select(['id', 'owner_id', 'token_hash'])
      .where('id', '=', `${ID_PREFIX.apiKey}_${body}`)
      .executeTakeFirst();
    if (!row || !tokenMatches(token, row.token_hash)) return undefined;
    return { id: row.id, owner_id: row.owner_id };
  }
}
