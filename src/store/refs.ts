import { ConflictError } from '../core/errors.js';
import type { Db } from './deps.js';

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

/**
 * Refuse a delete with a 409 while anything references `toId`; `message` names the referrer and
 * says what to remove first.
 * @example await refuseWhileReferenced(trx, id, CODES.caInUse, (by) => `still used by ${by}`);
 */
export async function refuseWhileReferenced(
  db: Db,
  toId: string,
  code: string,
  message: (referrer: string) => string,
): Promise<void> {
  const referrer = await findReferrer(db, toId);
  if (referrer !== undefined) throw new ConflictError(code, message(referrer));
}

/**
 * Refuse a delete of the reserved domain or address `id` with a 409 while an edge has it as a
 * hostport (`hostportUse` says how, after `name`) or anything else references it. `name` names it
 * as the messages begin, e.g. `The reserved domain app.example.com (rd_…)`.
 * @example await refuseWhileEdgeUses(trx, id, CODES.addrInUse, name, (use) => `is a hostport of the edge ${use.edge_id}.`);
 */
export async function refuseWhileEdgeUses(
  db: Db,
  id: string,
  code: string,
  name: string,
  hostportUse: (use: { edge_id: string; hostport: string }) => string,
): Promise<void> {
  const use = await db
    .selectFrom('edge_hostports')
    .select(['edge_id', 'hostport'])
    .where('target_id', '=', id)
    .limit(1)
    .executeTakeFirst();
  if (use) throw new ConflictError(code, `${name} ${hostportUse(use)}`);
  await refuseWhileReferenced(
    db,
    id,
    code,
    (by) => `${name} is still used by ${by}. Remove that use first.`,
  );
}

/** The tables other resources reference by id. */
export type ReferencedTable =
  'backends' | 'ip_policies' | 'certificate_authorities' | 'event_destinations';

/**
 * Ids among `ids` that name no row of `table`, in the order given, for reference checks.
 * @example await missingIds(trx, 'ip_policies', ['ipp_a', 'ipp_b']) // ['ipp_b'] when only ipp_a exists
 */
export async function missingIds(
  db: Db,
  table: ReferencedTable,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom(table)
    .select('id')
    .where('id', 'in', [...new Set(ids)])
    .execute();
  const present = new Set(rows.map((r) => r.id));
  return ids.filter((id) => !present.has(id));
}
