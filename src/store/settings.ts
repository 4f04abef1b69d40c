import type { Kysely } from 'kysely';
import { newId, ID_PREFIX } from '../core/ids.js';
import { isUniqueViolation } from './database.js';
import type { Database } from './schema.js';

/** Small server-wide values kept in the database, such as the account's user id. */
export class SettingsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async get(key: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('settings')
      .select('value')
      .where('key', '=', key)
      .executeTakeFirst();
    return row?.value;
  }

  /** The value of `key`, created with `make()` if absent; concurrent callers agree on one value. */
  async getOrCreate(key: string, make: () => string): Promise<string> {
    const existing = await this.get(key);
    if (existing !== undefined) return existing;
    try {
      await this.db.insertInto('settings').values({ key, value: make() }).execute();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    return (await this.get(key))!;
  }

  /** The id (`usr_...`) of the one account this server manages; owner of keys and tokens by default. */
  accountUserId(): Promise<string> {
    return this.getOrCreate('account_user_id', () => newId(ID_PREFIX.user));
  }
}
