import { parseAcl, type AclRule } from '../core/acl.js';
import { CODES, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { issueToken, tokenIdBody, tokenMatches } from '../core/tokens.js';
import type { RepoDeps } from './deps.js';
import { resolveOwner } from './owners.js';
import { describedChanges, describedColumns, describedOf } from './described.js';
import { ResourceRepository } from './resource-repository.js';
import type { CredentialsTable } from './schema.js';

/** An authtoken credential. `token` is the secret, present only in the reply that created it. */
export interface Credential {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  acl: string[];
  owner_id: string;
  token: string | null;
}

export interface CredentialCreate {
  description?: string | undefined;
  metadata?: string | undefined;
  acl?: readonly string[] | undefined;
  owner_id?: string | undefined;
}

export type CredentialUpdate = Pick<CredentialCreate, 'description' | 'metadata' | 'acl'>;

/** What the edge learns about an agent's authtoken. */
export interface AuthenticatedCredential {
  credential: { id: string; acl: string[]; owner_id: string };
  /** False when the owner is a bot user marked inactive (the edge refuses with ERR_NGROK_636). */
  ownerActive: boolean;
}

type CredentialRow = Omit<CredentialsTable, 'token_hash'>;

const COLUMNS = ['id', 'description', 'metadata', 'created_at', 'owner_id', 'acl'] as const;

function toCredential(row: CredentialRow, token: string | null = null): Credential {
  return {
    id: row.id,
    ...describedOf(row),
    acl: JSON.parse(row.acl) as string[],
    owner_id: row.owner_id,
    token,
  };
}

/** The canonical text of a parsed rule, so that equal rules are stored alike (lowercase names). */
function ruleText(raw: string, rule: AclRule): string {
  switch (rule.kind) {
    case 'any':
      return raw;
    case 'domain':
      return `bind:${rule.name}`;
    case 'suffix':
      return `bind:*.${rule.suffix}`;
    case 'addr':
      return `bind:${rule.host}:${rule.port}`;
    case 'label':
      return `bind:${rule.key}=${rule.value}`;
    case 'secrets':
      return raw;
  }
}

/**
 * Check every ACL rule and return them normalised; a bad rule is a 400 ERR_NGROK_600 naming
 * `acl[i]` and what is wrong with it.
 * @example normalizeAcl(['bind:*.SiteA.example.com']) // ['bind:*.sitea.example.com']
 */
export function normalizeAcl(acl: readonly string[]): string[] {
  const parsed = parseAcl(acl);
  if ('error' in parsed) {
    throw new ValidationError(
      CODES.invalidAclRule,
      `acl[${parsed.index}]`,
      `${parsed.error}. A rule is '*', 'bind:' followed by a domain, '*.<domain>', '<host>:<port>' or '<key>=<value>', or 'secrets:read:' followed by a vault name or '*'.`,
    );
  }
  return parsed.rules.map((rule, i) => ruleText(acl[i]!, rule));
}

/**
 * Authtokens for agents. Only a SHA-256 hash of the token is stored; `create` returns the token
 * once. `authenticate` is what the edge calls when an agent presents a token.
 * @example const { token } = await credentials.create({ acl: ['bind:*.sitea.example.com'], owner_id: bot.id });
 */
export class CredentialRepository extends ResourceRepository<
  'credentials',
  Credential,
  CredentialRow
> {
  constructor(private readonly deps: RepoDeps) {
    super(deps.db, 'credentials', (row) => toCredential(row), COLUMNS);
  }

  async create(input: CredentialCreate): Promise<Credential> {
    const acl = normalizeAcl(input.acl ?? []);
    const ownerId = await resolveOwner(this.deps.db, this.deps.accountSettings, input.owner_id);
    const id = newId(ID_PREFIX.credential);
    const { token, hash } = issueToken(id);
    const row: CredentialsTable = {
      id,
      ...describedColumns(input),
      owner_id: ownerId,
      acl: JSON.stringify(acl),
      token_hash: hash,
    };
    await this.deps.db.insertInto('credentials').values(row).execute();
    return toCredential(row, token);
  }

  /** Change the fields given; `acl`, when given, replaces the whole list. */
  async update(id: string, patch: CredentialUpdate): Promise<Credential | undefined> {
    const set: Partial<CredentialsTable> = describedChanges(patch);
    if (patch.acl !== undefined) set.acl = JSON.stringify(normalizeAcl(patch.acl));
    await this.writeColumns(id, set);
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  /**
   * The credential an agent's token belongs to, or undefined when the token is unknown, revoked or
   * garbled. Looks the row up by the id the token names and compares hashes in constant time.
   * @example const auth = await credentials.authenticate(token); if (!auth?.ownerActive) refuse();
   */
  async authenticate(token: string): Promise<AuthenticatedCredential | undefined> {
    const body = tokenIdBody(token);
    if (!body) return undefined;
    const row = await this.deps.db
      .selectFrom('credentials')
      .select(['id', 'acl', 'owner_id', 'token_hash'])
      .where('id', '=', `${ID_PREFIX.credential}_${body}`)
      .executeTakeFirst();
    if (!row || !tokenMatches(token, row.token_hash)) return undefined;
    return {
      credential: { id: row.id, acl: JSON.parse(row.acl) as string[], owner_id: row.owner_id },
      ownerActive: await this.ownerActive(row.owner_id),
    };
  }

  /**
   * Of `ids`, which credentials may still serve agents: present, and owned by an active user.
   * Missing ids are revoked ('deleted'); an inactive (or deleted) bot owner gives 'inactive'. One
   * query, cheap enough for the edge to run every second over its live sessions' credentials.
   * @example const status = await credentials.standing(['cr_…']); status.get('cr_…') ?? 'deleted';
   */
  async standing(ids: readonly string[]): Promise<Map<string, 'ok' | 'inactive'>> {
    const out = new Map<string, 'ok' | 'inactive'>();
    if (ids.length === 0) return out;
    const rows = await this.deps.db
      .selectFrom('credentials')
      .leftJoin('bot_users', 'bot_users.id', 'credentials.owner_id')
      .select(['credentials.id as id', 'credentials.owner_id as owner_id', 'bot_users.active'])
      .where('credentials.id', 'in', [...ids])
      .execute();
    for (const row of rows) {
      const bot = row.owner_id.startsWith(`${ID_PREFIX.botUser}_`);
      out.set(row.id, !bot || row.active === 1 ? 'ok' : 'inactive');
    }
    return out;
  }

  /** The account user is always active; a bot user is active unless marked otherwise (or gone). */
  private async ownerActive(ownerId: string): Promise<boolean> {
    if (!ownerId.startsWith(`${ID_PREFIX.botUser}_`)) return true;
    const bot = await this.deps.db
      .selectFrom('bot_users')
      .select('active')
      .where('id', '=', ownerId)
      .executeTakeFirst();
    return bot?.active === 1;
  }
}
