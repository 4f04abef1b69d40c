/**
 * What a configuration notice between nodes names (its `data`): the ids that changed, so the
 * receiving node reloads those alone. A notice without them (or after a reconnect) means "reload
 * everything of this topic".
 * - topic 'edges': `{ edges: [edge ids] }` after an edge's write, `{ inputs: [ids] }` after a
 *   change to a backend, IP policy or CA (the receiver reloads the edges that read one);
 * - topic 'cloud_endpoints': `{ ids: [endpoint ids] }`.
 */
export type ChangedIdsKey = 'edges' | 'inputs' | 'ids';

/** More ids than this in one notice is a bulk change: reloading everything costs no more. */
const MOST_IDS = 1000;

/**
 * The ids `data[key]` lists, or undefined when it lists none (not a notice of that kind, or a
 * malformed one: the receiver then reloads everything, which is always right).
 * @example changedIds({ edges: ['edgtcp_1'] }, 'edges') // ['edgtcp_1']
 * @example changedIds(undefined, 'edges') // undefined
 */
export function changedIds(data: unknown, key: ChangedIdsKey): string[] | undefined {
  if (data === null || typeof data !== 'object') return undefined;
  const value = (data as Record<string, unknown>)[key];
  if (!Array.isArray(value) || value.length > MOST_IDS) return undefined;
  return value.every((id): id is string => typeof id === 'string') ? value : undefined;
}
