import type { Kysely } from 'kysely';
import { ID_PREFIX, newId } from '../core/ids.js';
import { issueToken, tokenIdBody, tokenMatches } from '../core/tokens.js';
import { resolveOwner } from './owners.js';
import { describedChanges, describedColumns } from './described.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
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

function toApiKey(row: Omit<ApiKeysTable, 'token_hash'>, token: string | null = null): ApiKey {
  return {
    id: row.id,
    description: row.description,
    metadata: row.metadata,
    created_at: row.created_at,
    owner_id: row.owner_id,
    token,
  };
}

const COLUMNS = ['id', 'description', 'metadata', 'created_at', 'owner_id'] as const;

/**
 * API keys, stored as SHA-256 hashes; the token is returned once, by `create`.
 * @example const { token } = await apiKeys.create({ description: 'ci' });
 */
export class ApiKeyRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly settings: SettingsRepository,
  ) {}

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

  async get(id: string): Promise<ApiKey | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toApiKey(row);
  }

  async list(page: PageRequest): Promise<Page<ApiKey>> {
    const result = await selectPage(this.db.selectFrom('api_keys').select(COLUMNS), page);
    return { items: result.items.map((r) => toApiKey(r)), nextBeforeId: result.nextBeforeId };
  }

  async update(id: string, patch: ApiKeyUpdate): Promise<ApiKey | undefined> {
    const set: Partial<ApiKeysTable> = describedChanges(patch);
    if (Object.keys(set).length > 0)
      await this.db.updateTable('api_keys').set(set).where('id', '=', id).execute();
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    const res = await this.db.deleteFrom('api_keys').where('id', '=', id).executeTakeFirst();
    return res.numDeletedRows > 0n;
  }

  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
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
