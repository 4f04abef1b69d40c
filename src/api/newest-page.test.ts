import { describe, expect, it } from 'vitest';
import { newestPage } from './paging.js';

/** The reference: filter, sort newest first, slice (what the online lists did before). */
function sortedPage(ids: string[], beforeId: string | undefined, limit: number) {
  const sorted = ids
    .filter((id) => beforeId === undefined || id < beforeId)
    .sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
  const items = sorted.slice(0, limit);
  return { items, nextBeforeId: sorted.length > limit ? items[items.length - 1] : undefined };
}

describe('newestPage: one pass keeps the newest page', () => {
  it('matches filter + sort + slice on random lists, orders and cursors', () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 500; round++) {
      const ids = [
        ...new Set(Array.from({ length: rand(60) }, () => `tn_${rand(1000)}`.padEnd(8, 'x'))),
      ];
      const limit = 1 + rand(12);
      const beforeId = rand(3) === 0 ? undefined : (ids[rand(ids.length)] ?? 'tn_500');
      const page = newestPage(ids, (id) => id, { beforeId, limit });
      expect(page).toEqual(sortedPage(ids, beforeId, limit));
    }
  });

  it('walks a whole list page by page, each item once, newest first', () => {
    const ids = Array.from({ length: 250 }, (_, i) => `tn_${String(i).padStart(4, '0')}`).reverse();
    const seen: string[] = [];
    let beforeId: string | undefined;
    do {
      const page = newestPage(
        ids,
        (id) => id,
        { beforeId, limit: 100 },
        (id) => !id.endsWith('7'),
      );
      seen.push(...page.items);
      beforeId = page.nextBeforeId;
    } while (beforeId !== undefined);
    expect(seen).toEqual(
      [...ids]
        .sort()
        .reverse()
        .filter((id) => !id.endsWith('7')),
    );
  });
});
