import type { Kysely } from 'kysely';
import { CODES, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import type { Database } from './schema.js';
import type { SettingsRepository } from './settings.js';

/** Who else may own a key, by id prefix: bot users, and dashboard users (keys they create there). */
const OWNER_TABLES = [
  ['bot_', 'bot_users'],
  ['usr_', 'users'],
] as const;

/**
 * The owner of an API key or authtoken: the account's user (the default) or one of its bot users.
 * Returns the owner id to store, or throws naming `owner_id`.
 */
export async function resolveOwner(
  db: Kysely<Database>,
  settings: SettingsRepository,
  ownerId: string | undefined,
): Promise<string> {
  const account = await settings.accountUserId();
  if (ownerId === undefined || ownerId === '' || ownerId === account) return account;
  for (const [prefix, table] of OWNER_TABLES) {
    if (!ownerId.startsWith(prefix)) continue;
    const owner = await db
      .selectFrom(table)
      .select('id')
      .where('id', '=', ownerId)
      .executeTakeFirst();
    if (owner) return ownerId;
  }
  throw new ValidationError(
    CODES.invalidOwner,
    'owner_id',
    `${quote(ownerId)} is neither the account's user (${account}), a dashboard user nor an existing bot user`,
  );
}
