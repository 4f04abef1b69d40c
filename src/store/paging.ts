import type { SelectQueryBuilder } from 'kysely';
import type { Database } from './schema.js';

/** A page request: items created before `beforeId` (exclusive), newest first. */
export interface PageRequest {
  beforeId?: string | undefined;
  limit: number;
}

/** A page of items and the id to continue from, undefined when nothing older exists. */
export interface Page<T> {
  items: T[];
  nextBeforeId: string | undefined;
}

/**
 * Run `query` (a select over a table with an `id` column, of schema.ts's tables or a repository's
 * own) as one page, newest first. Fetches one
 * extra row so that `nextBeforeId` is set exactly when an older item exists.
 */
export async function selectPage<TB extends keyof DB, Row extends { id: string }, DB = Database>(
  query: SelectQueryBuilder<DB, TB, Row>,
  page: PageRequest,
  idColumn: string = 'id',
): Promise<Page<Row>> {
  // The dynamic column reference keeps this helper generic over tables; every table has `id`.
  const col = idColumn as never;
  let q = query.orderBy(col, 'desc').limit(page.limit + 1);
  if (page.beforeId !== undefined) q = q.where(col, '<', page.beforeId as never);
  const rows = await q.execute();
  const more = rows.length > page.limit;
  const items = more ? rows.slice(0, page.limit) : rows;
  return { items, nextBeforeId: more ? items[items.length - 1]!.id : undefined };
}

/** Current time as RFC 3339 UTC to the second, the format of every `created_at`. */
export function nowRfc3339(now = new Date()): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
