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
  if (changes.remove.length === 0 && changes.add.length === 0) return raw;
  const removed = changes.remove.filter((name) => !ownedOnRemove.has(name));
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (removed.length > 0 && removed.includes(raw[i]!.toLowerCase())) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  for (const [name, value] of changes.add) if (!ownedOnAdd.has(name)) out.push(name, value);
  return out;
}
