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
