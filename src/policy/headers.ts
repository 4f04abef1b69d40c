/**
 * Header values as the ingress hands them over (Node's `IncomingHttpHeaders` /
 * `OutgoingHttpHeaders`): names in lower case, as Node gives them; a string, a list for repeated
 * headers, or a number.
 */
export type HeaderInput = Readonly<Record<string, string | readonly string[] | number | undefined>>;

/** Header changes a phase asks for, applied in this order: first `remove`, then `add`. */
export interface HeaderChanges {
  /** Lower-case names to drop from the original message. */
  readonly remove: readonly string[];
  /** Lower-case name and value pairs to append (a repeated name appends several values). */
  readonly add: ReadonlyArray<readonly [string, string]>;
}

/** No changes: shared, so a phase that edits nothing allocates nothing. */
export const NO_HEADER_CHANGES: HeaderChanges = Object.freeze({
  remove: Object.freeze([]),
  add: Object.freeze([]),
});

/**
 * Header edits accumulated by actions, kept as the net effect of the sequence: removing a name
 * also drops values added for it earlier, so "add X, remove X" leaves X removed and "remove X,
 * add X" replaces X.
 * @example const e = new HeaderEdits(); e.add('x-a', '1'); e.remove('x-a'); e.changes().add // []
 */
export class HeaderEdits {
  private removed: string[] = [];
  private added: Array<[string, string]> = [];
  /** Added pairs whose value holds a secret: sent as they are, shown to rules as [secret]. */
  private secret: Set<readonly [string, string]> | undefined;

  /** True when nothing was asked for. */
  get empty(): boolean {
    return this.removed.length === 0 && this.added.length === 0;
  }

  remove(name: string): void {
    const lower = name.toLowerCase();
    if (!this.removed.includes(lower)) this.removed.push(lower);
    if (this.added.some(([n]) => n === lower)) {
      this.added = this.added.filter(([n]) => n !== lower);
    }
  }

  add(name: string, value: string, holdsSecret = false): void {
    // As rendered: a value with a control character is refused where the edge writes the head
    // (ingress http-policy.ts, http-responses.ts), never cleaned into another value.
    const pair: [string, string] = [name.toLowerCase(), value];
    this.added.push(pair);
    if (holdsSecret) (this.secret ??= new Set()).add(pair);
  }

  /** The net changes, for a decision. */
  changes(): HeaderChanges {
    return this.empty ? NO_HEADER_CHANGES : { remove: this.removed, add: this.added };
  }

  /**
   * The net changes as later rules see them (`req.headers`, `res.headers`): a value that holds a
   * secret reads as `shown`, so no rule can compute on it and carry the result into an event.
   */
  visibleChanges(shown: string): HeaderChanges {
    const secret = this.secret;
    if (!secret || this.empty) return this.changes();
    const add = this.added.map((pair) => (secret.has(pair) ? ([pair[0], shown] as const) : pair));
    return { remove: this.removed, add };
  }
}

/**
 * The header map CEL sees (`req.headers`, `res.headers`): lower-case names to lists of values,
 * with `changes` applied, so a rule sees what earlier actions did.
 * @example headerMap({ 'x-a': '1', 'set-cookie': ['a', 'b'] }).get('set-cookie') // ['a', 'b']
 */
export function headerMap(
  input: HeaderInput,
  changes: HeaderChanges = NO_HEADER_CHANGES,
): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const name in input) {
    const value = input[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (changes.remove.includes(lower)) continue;
    const values = typeof value === 'object' ? [...value] : [String(value)];
    const existing = map.get(lower);
    if (existing) existing.push(...values);
    else map.set(lower, values);
  }
  for (const [name, value] of changes.add) {
    const existing = map.get(name);
    if (existing) existing.push(value);
    else map.set(name, [value]);
  }
  return map;
}

/**
 * The first value of header `name` in `input` (names compared without case), or undefined.
 * @example firstHeader({ 'content-type': 'text/html' }, 'Content-Type') // 'text/html'
 */
export function firstHeader(input: HeaderInput, name: string): string | undefined {
  const lower = name.toLowerCase();
  let value = input[lower];
  if (value === undefined) {
    for (const key in input) {
      if (key.toLowerCase() === lower) {
        value = input[key];
        break;
      }
    }
  }
  if (value === undefined) return undefined;
  if (typeof value === 'object') return value[0];
  return String(value);
}

/**
 * Apply `changes` to a Node header object in place (for example `proxyReq` headers before they
 * are sent, or the upstream response's headers before they are written to the client).
 * @example
 * const headers = { host: 'a', 'x-drop': '1' };
 * applyHeaderChanges(headers, { remove: ['x-drop'], add: [['x-add', '1']] }); // { host: 'a', 'x-add': '1' }
 */
export function applyHeaderChanges(
  headers: Record<string, string | string[] | number | undefined>,
  changes: HeaderChanges,
): void {
  for (const name of changes.remove) {
    for (const key of Object.keys(headers)) if (key.toLowerCase() === name) delete headers[key];
  }
  for (const [name, value] of changes.add) {
    const existing = headers[name];
    if (existing === undefined) headers[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else headers[name] = [String(existing), value];
  }
}

/**
 * A header name in Go's canonical form, as the older PascalCase `req.Headers` map keyed them.
 * @example canonicalHeaderName('x-forwarded-for') // 'X-Forwarded-For'
 */
export function canonicalHeaderName(name: string): string {
  return name
    .split('-')
    .map((part) => (part ? part[0]!.toUpperCase() + part.slice(1).toLowerCase() : part))
    .join('-');
}

/** RFC 9110 token characters: what a header name may contain. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Whether `name` can be a header name.
 * @example isHeaderName('X-Burrow') // true
 */
export function isHeaderName(name: string): boolean {
  return TOKEN.test(name);
}

/**
 * `map` with lookups (`[]`, `in`, `has()`) that ignore the key's case: `req.headers['X-Api-Version']`
 * finds the header the map keeps as `x-api-version`, as users copying ngrok's examples expect.
 * CEL reads maps by `get` and knows them by their constructor (Map), so the lookups are replaced
 * on the instance rather than by a subclass. `normalize` gives the key the map is keyed by.
 */
export function caseInsensitiveLookups<V>(
  map: Map<string, V>,
  normalize: (key: string) => string,
): Map<string, V> {
  const get = map.get.bind(map);
  const has = map.has.bind(map);
  map.get = (key: string) =>
    get(key) ?? (typeof key === 'string' ? get(normalize(key)) : undefined);
  map.has = (key: string) => has(key) || (typeof key === 'string' && has(normalize(key)));
  return map;
}
