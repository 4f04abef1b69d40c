import type { Kysely } from 'kysely';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { isUniqueViolation } from './database.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';
import type { BotUsersTable, Database } from './schema.js';

/** A bot user: a user that belongs to no person; it can own authtokens. */
export interface BotUser {
  id: string;
  name: string;
  active: boolean;
  created_at: string;
}

export interface BotUserCreate {
  name: string;
  active?: boolean | undefined;
}

export type BotUserUpdate = Partial<BotUserCreate>;

function toBotUser(row: BotUsersTable): BotUser {
  return { id: row.id, name: row.name, active: row.active === 1, created_at: row.created_at };
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw new ValidationError(CODES.botNameEmpty, 'name', 'must not be empty');
  return trimmed;
}

/**
 * Bot users. Names are unique; a bot user that still owns credentials or API keys cannot be deleted.
 * @example await bots.create({ name: 'sitea-agents' })
 */
export class BotUserRepository extends ResourceRepository<'bot_users', BotUser> {
  constructor(db: Kysely<Database>) {
    super(db, 'bot_users', toBotUser);
  }

  async create(input: BotUserCreate): Promise<BotUser> {
    const row: BotUsersTable = {
      id: newId(ID_PREFIX.botUser),
      name: checkName(input.name),
      active: input.active === false ? 0 : 1,
      created_at: nowRfc3339(),
    };
    try {
      await this.db.insertInto('bot_users').values(row).execute();
    } catch (err) {
      throw this.nameTaken(err, row.name);
    }
    return toBotUser(row);
  }

  async update(id: string, patch: BotUserUpdate): Promise<BotUser | undefined> {
    const set: Partial<BotUsersTable> = {};
    if (patch.name !== undefined) set.name = checkName(patch.name);
    if (patch.active !== undefined) set.active = patch.active ? 1 : 0;
    await this.writeColumns(id, set, (err) => this.nameTaken(err, set.name ?? ''));
    return this.get(id);
  }

  /** Delete; false when absent. Refused while the bot owns credentials or API keys. */
  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      const owned =
        (await trx
          .selectFrom('credentials')
          .select('id')
          .where('owner_id', '=', id)
          .limit(1)
          .executeTakeFirst()) ??
        (await trx
          .selectFrom('api_keys')
          .select('id')
          .where('owner_id', '=', id)
          .limit(1)
          .executeTakeFirst());
      if (owned) {
        throw new ConflictError(
          CODES.botUserInUse,
          `The bot user ${id} still owns ${owned.id}. Delete what it owns first, or set active to false instead: that refuses its authtokens and API keys at once and keeps them.`,
        );
      }
    });
  }

  private nameTaken(err: unknown, name: string): unknown {
    if (!isUniqueViolation(err)) return err;
    return new ConflictError(
      CODES.botNameTaken,
      `A bot user named ${quote(name)} already exists; names must be unique.`,
    );
  }
}
