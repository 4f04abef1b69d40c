import { sql, type Kysely } from 'kysely';
import { ID_PREFIX, newId } from '../core/ids.js';
import { isRole, PERMISSIONS, type Permission, type Role } from '../core/roles.js';
import { issueToken, tokenIdBody, tokenMatches } from '../core/tokens.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
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
  /** A role narrower than the owner's, or null: the owner's role (src/core/roles.ts). */
  role: Role | null;
  /** The permissions the key is limited to, or null: all its role allows. */
  scopes: Permission[] | null;
  token: string | null;
}

export interface ApiKeyCreate {
  description?: string | undefined;
  metadata?: string | undefined;
  owner_id?: string | undefined;
  /** Checked by the caller (src/api/api-keys.ts): no wider than the creator's. */
  role?: Role | null | undefined;
  scopes?: Permission[] | null | undefined;
}

/**
 * A key's owner as stored, read with the key: a bot user (whether active) or a dashboard user
 * (their role); null when the owner has no such row (the account's user, or an owner deleted).
 */
export type KeyOwnerRow = { kind: 'bot'; active: boolean } | { kind: 'user'; role: Role } | null;

/** What authentication needs of a key. */
export interface VerifiedApiKey {
  id: string;
  owner_id: string;
  role: Role | null;
  scopes: Permission[] | null;
  owner: KeyOwnerRow;
}

export type ApiKeyUpdate = Pick<ApiKeyCreate, 'description' | 'metadata'>;

type ApiKeyRow = Omit<ApiKeysTable, 'token_hash'>;

/** What `verify` reads: the key and its owner's row, if any (a bot user or a dashboard user). */
type VerifyRow = Pick<ApiKeysTable, 'id' | 'owner_id' | 'token_hash' | 'role' | 'scopes'> & {
  bot_active: number | null;
  user_role: string | null;
};

/** A stored role; anything else (a row written by hand) counts as the narrowest. */
function roleOf(value: string | null): Role | null {
  if (value === null) return null;
  return isRole(value) ? value : 'viewer';
}

/** Stored scopes; unknown names are dropped, and a list that was not one allows nothing. */
function scopesOf(value: string | null): Permission[] | null {
  if (value === null) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.filter((s): s is Permission => (PERMISSIONS as readonly unknown[]).includes(s));
}

function toApiKey(row: ApiKeyRow, token: string | null = null): ApiKey {
  return {
    id: row.id,
    ...describedOf(row),
    owner_id: row.owner_id,
    role: roleOf(row.role),
    scopes: scopesOf(row.scopes),
    token,
  };
}

const COLUMNS = [
  'id',
  'description',
  'metadata',
  'created_at',
  'owner_id',
  'role',
  'scopes',
] as const;

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
      role: input.role ?? null,
      scopes: input.scopes ? JSON.stringify(input.scopes) : null,
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

  /** The keys `ownerId` owns, newest first, in pages (what a non-admin sees of `/api_keys`). */
  async listOwnedBy(ownerId: string, page: PageRequest): Promise<Page<ApiKey>> {
    const result = await selectPage(
      this.db.selectFrom('api_keys').select(COLUMNS).where('owner_id', '=', ownerId),
      page,
    );
    return { items: result.items.map((row) => toApiKey(row)), nextBeforeId: result.nextBeforeId };
  }

  async count(): Promise<number> {
    return countRows(this.db, 'api_keys');
  }

  /**
   * The key a presented token belongs to, or undefined; compares hashes in constant time. Its
   * owner's row (a bot user's `active`, a dashboard user's role) comes in the same query: the API
   * checks it on every request.
   */
  async verify(token: string): Promise<VerifiedApiKey | undefined> {
    const body = tokenIdBody(token);
    if (!body) return undefined;
    // Run on every API request: as SQL, which costs less CPU to build than the query builder's
    // two joins (on SQLite about 20 µs an auth, against 33 for the two queries it replaces).
    const { rows } = await sql<VerifyRow>`
      select k.id, k.owner_id, k.token_hash, k.role, k.scopes,
        b.active as bot_active, u.role as user_role
      from api_keys k
      left join bot_users b on b.id = k.owner_id
      left join users u on u.id = k.owner_id
      where k.id = ${`${ID_PREFIX.apiKey}_${body}`}`.execute(this.db);
    const row = rows[0];
    if (!row || !tokenMatches(token, row.token_hash)) return undefined;
    const userRole = roleOf(row.user_role);
    return {
      id: row.id,
      owner_id: row.owner_id,
      role: roleOf(row.role),
      scopes: scopesOf(row.scopes),
      owner:
        row.bot_active !== null
          ? { kind: 'bot', active: row.bot_active === 1 }
          : userRole !== null
            ? { kind: 'user', role: userRole }
            : null,
    };
  }
}
