import { CODES, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import type { Page, PageRequest } from '../store/paging.js';

export const MAX_PAGE_SIZE = 100;

/** Read `before_id` and `limit` from a list query; limit must be an integer 1..100. */
export function pageRequest(query: {
  before_id?: string | undefined;
  limit?: string | undefined;
}): PageRequest {
  let limit = MAX_PAGE_SIZE;
  if (query.limit !== undefined) {
    if (
      !/^\d+$/.test(query.limit) ||
      Number(query.limit) < 1 ||
      Number(query.limit) > MAX_PAGE_SIZE
    ) {
      throw new ValidationError(
        CODES.invalidLimit,
        'limit',
        `must be an integer from 1 to ${MAX_PAGE_SIZE}, got ${quote(query.limit)}`,
      );
    }
    limit = Number(query.limit);
  }
  const beforeId = query.before_id === '' ? undefined : query.before_id;
  return { beforeId, limit };
}

/**
 * The list envelope: items under `key`, the collection's absolute `uri`, and `next_page_uri`,
 * null exactly when nothing older exists.
 */
export function listEnvelope<K extends string, T>(
  key: K,
  page: Page<T>,
  collectionUri: string,
  request: PageRequest,
): { [P in K]: T[] } & { uri: string; next_page_uri: string | null } {
  const next =
    page.nextBeforeId === undefined
      ? null
      : `${collectionUri}?before_id=${encodeURIComponent(page.nextBeforeId)}&limit=${request.limit}`;
  return { [key]: page.items, uri: collectionUri, next_page_uri: next } as { [P in K]: T[] } & {
    uri: string;
    next_page_uri: string | null;
  };
}

/**
 * The newest page of in-memory `items` (newest first, ids time-ordered, `beforeId` exclusive)
 * without sorting or copying the whole list: candidates gather in a buffer of a few pages, which is
 * cut back to the `limit + 1` newest whenever it fills, and anything older than the cut is skipped
 * from then on. O(n log limit) in the worst case (items arriving oldest first, as registries add
 * them), so a page costs little whether 10 or 100,000 items are online.
 * @example newestPage(registry.listSessions(), (s) => s.id, { limit: 100 })
 */
export function newestPage<T>(
  items: Iterable<T>,
  idOf: (item: T) => string,
  page: PageRequest,
): Page<T> {
  const keep = page.limit + 1;
  let ids: string[] = [];
  let kept: T[] = [];
  /** The oldest id still kept after the last cut: older ones cannot make the page. */
  let floor: string | undefined;
  const cut = (): void => {
    const order = ids.map((_, i) => i).sort((a, b) => (ids[a]! < ids[b]! ? 1 : -1));
    order.length = Math.min(order.length, keep);
    ids = order.map((i) => ids[i]!);
    kept = order.map((i) => kept[i]!);
    if (ids.length === keep) floor = ids[keep - 1];
  };
  for (const item of items) {
    const id = idOf(item);
    if (page.beforeId !== undefined && id >= page.beforeId) continue;
    if (floor !== undefined && id <= floor) continue;
    ids.push(id);
    kept.push(item);
    if (ids.length >= 4 * keep) cut();
  }
  cut();
  const more = kept.length > page.limit;
  if (more) kept.pop();
  return { items: kept, nextBeforeId: more ? idOf(kept[kept.length - 1]!) : undefined };
}

/**
 * The items of `items` that `keep` accepts, lazily (no array of them is built).
 * @example newestPage(matching(registry.listTunnels(), servedByAgent), (t) => t.id, page)
 */
export function* matching<T>(items: Iterable<T>, keep: (item: T) => boolean): Generator<T> {
  for (const item of items) if (keep(item)) yield item;
}
