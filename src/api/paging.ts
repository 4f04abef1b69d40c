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
 * The newest page of in-memory `items` that `accept` takes (newest first, ids time-ordered,
 * `beforeId` exclusive) without sorting or copying the whole list: candidates gather in a buffer
 * of a few pages, which is cut back to the `limit + 1` newest whenever it fills, and anything older
 * than the cut is skipped from then on. O(n log limit) even when items come oldest first, as
 * registries add them.
 * @example newestPage(registry.listTunnels(), (t) => t.id, { limit: 100 }, servedByAgent)
 */
export function newestPage<T>(
  items: Iterable<T>,
  idOf: (item: T) => string,
  page: PageRequest,
  accept: (item: T) => boolean = () => true,
): Page<T> {
  const keep = page.limit + 1;
  const kept: { id: string; item: T }[] = [];
  /** The oldest id kept by the last full cut: older ones cannot make the page. */
  let floor: string | undefined;
  const cut = (): void => {
    kept.sort((a, b) => (a.id < b.id ? 1 : -1));
    if (kept.length >= keep) {
      kept.length = keep;
      floor = kept[keep - 1]!.id;
    }
  };
  for (const item of items) {
    if (!accept(item)) continue;
    const id = idOf(item);
    if (page.beforeId !== undefined && id >= page.beforeId) continue;
    if (floor !== undefined && id <= floor) continue;
    kept.push({ id, item });
    if (kept.length >= 4 * keep) cut();
  }
  cut();
  const more = kept.length > page.limit;
  if (more) kept.pop();
  return {
    items: kept.map((k) => k.item),
    nextBeforeId: more ? kept[kept.length - 1]!.id : undefined,
  };
}
