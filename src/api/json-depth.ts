/**
 * How deep a parsed JSON body nests (`--api-max-json-depth`). Deep bodies are cheap to send and
 * costly to walk (schema validation, the storable-string check, the store's JSON columns), and
 * recursive code anywhere on the way would overflow the stack: they are refused before any of it.
 */

/** How a value met on an iterative walk was reached; the path is built only when reported. */
export interface Reached {
  key: string | number | undefined;
  parent: Reached | undefined;
}

/** The field path from the walk's root to `visit` (empty for the root itself). */
export function pathOf(visit: Reached): (string | number)[] {
  const parts: (string | number)[] = [];
  for (let v: Reached | undefined = visit; v?.key !== undefined; v = v.parent) parts.push(v.key);
  return parts.reverse();
}

/** A container met on the depth walk. */
interface Visit extends Reached {
  value: unknown;
  depth: number;
}

/**
 * The path to the first container nested deeper than `max` levels (the body itself is level 1),
 * or undefined if none is. Iterative, so no depth of input overflows the stack.
 * @example deeperThan({ a: { b: [] } }, 2) // ['a', 'b']
 */
export function deeperThan(root: unknown, max: number): (string | number)[] | undefined {
  const stack: Visit[] = [{ value: root, depth: 1, key: undefined, parent: undefined }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { value, depth } = visit;
    if (value === null || typeof value !== 'object') continue;
    if (depth > max) return pathOf(visit);
    const entries: [string | number, unknown][] = Array.isArray(value)
      ? value.map((item, i): [number, unknown] => [i, item])
      : Object.entries(value as Record<string, unknown>);
    // Pushed last to first, so that the first offending field is the one reported.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      if (item !== null && typeof item === 'object') {
        stack.push({ value: item, depth: depth + 1, key, parent: visit });
      }
    }
  }
  return undefined;
}
