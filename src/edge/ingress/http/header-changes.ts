/**
 * A traffic policy's header changes as the ingress applies them, on both HTTP paths: to the raw
 * header list it writes (`[name, value, …]`), never to the headers the ingress owns itself.
 */
import { HOP_BY_HOP_HEADERS } from '../../../core/http-framing.js';
import type { HeaderChanges } from '../../../policy/index.js';

/** A policy's changes to these request headers are ignored: the ingress sets them itself. */
export const REQUEST_OWNED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'content-length',
  'host',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
]);
/** A response may lose its length (compress-response drops it) but never gain one. */
export const RESPONSE_ADD_OWNED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'content-length',
]);
export const RESPONSE_REMOVE_OWNED = HOP_BY_HOP_HEADERS;

/**
 * A raw header list (`[name, value, …]`) with a phase's changes applied: removals first, then
 * additions, skipping the names the ingress owns.
 * @example applyToRawHeaders(['A', '1', 'B', '2'], { remove: ['a'], add: [['c', '3']] }, new Set()) // ['B', '2', 'c', '3']
 */
export function applyToRawHeaders(
  raw: string[],
  changes: HeaderChanges,
  ownedOnRemove: ReadonlySet<string>,
  ownedOnAdd: ReadonlySet<string> = ownedOnRemove,
): string[] {
  const { remove, add } = changes;
  if (remove.length === 0 && add.length === 0) return raw;
  const removed = remove.length === 0 ? remove : remove.filter((name) => !ownedOnRemove.has(name));
  let out: string[];
  if (removed.length === 0) {
    // Most phases only add: the list is copied whole, not rebuilt pair by pair.
    out = raw.slice();
  } else {
    out = [];
    for (let i = 0; i < raw.length; i += 2) {
      if (removed.includes(raw[i]!.toLowerCase())) continue;
      out.push(raw[i]!, raw[i + 1]!);
    }
  }
  for (const [name, value] of add) if (!ownedOnAdd.has(name)) out.push(name, value);
  return out;
}
