import type { Kysely } from 'kysely';
import { CODES, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import type { Database } from './schema.js';
import type { SettingsRepository } from './settings.js';

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
  if (ownerId.startsWith('bot_')) {
    const bot = await db
      .selectFrom('bot_users')
      .select('id')
      .where('id', '=', ownerId)
      .executeTakeFirst();
    if (bot) return ownerId;
  }
  // A dashboard user owns the keys they create there.
  if (ownerId.startsWith('usr_')) {
    const user = await db
      .selectFrom('users')
      .select('id')
      .where('id', '=', ownerId)
      .executeTakeFirst();
    if (user) return ownerId;
  }
  throw new ValidationError(
    CODES.invalidOwner,
    'owner_id',
    `${quote(ownerId)} is neither the account's user (${account}), a dashboard user nor an existing bot user`,
  );
}
