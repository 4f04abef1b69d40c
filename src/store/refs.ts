import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.js';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * The `refs` table records which resource uses which, so that a delete can be refused with the
 * name of what still uses the resource, on both databases and without scanning JSON.
 */
export async function setRefs(db: Db, fromId: string, toIds: Iterable<string>): Promise<void> {
  await db.deleteFrom('refs').where('from_id', '=', fromId).execute();
  const unique = [...new Set(toIds)];
  if (unique.length > 0) {
    await db
      .insertInto('refs')
      .values(unique.map((to_id) => ({ from_id: fromId, to_id })))
      .execute();
  }
}

/** Remove every reference made by `fromId` (its owner is being deleted). */
export async function clearRefs(db: Db, fromId: string): Promise<void> {
  await db.deleteFrom('refs').where('from_id', '=', fromId).execute();
}

/** Some resource that references `toId`, or undefined. */
export async function findReferrer(db: Db, toId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('refs')
    .select('from_id')
    .where('to_id', '=', toId)
    .limit(1)
    .executeTakeFirst();
  return row?.from_id;
}
