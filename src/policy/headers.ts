/**
 * Header values as the ingress hands them over (Node's `IncomingHttpHeaders` /
 * `OutgoingHttpHeaders`): names in lower case, as Node gives them; a string, a list for repeated
 * headers, or a number.
 */
export type HeaderInput = Readonly<Record<string, string | readonly string[] | number | undefined>>;

/**
 * Headers as a head parser read them, in Node's `rawHeaders` form (`[name, value, …]`, names in
 * any case): the lean relay hands them over so, and nothing is built from them for a phase that
 * reads no header. They read as the object the ingress's `headersOf` makes of such a list: names
 * in lower case, a repeated header's values joined with `, `, `set-cookie` a list.
 */
export type RawHeaders = readonly string[];

/** The headers of a request or response: an object as Node gives them, or a raw list. */
export type MessageHeaders = HeaderInput | RawHeaders;

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
  /** changes() since the last edit: a phase asks for it more than once (its rules, its decision). */
  private net: HeaderChanges | undefined;

  /** True when nothing was asked for. */
  get empty(): boolean {
    return this.removed.length === 0 && this.added.length === 0;
  }

  remove(name: string): void {
    this.net = undefined;
    const lower = name.toLowerCase();
    if (!this.removed.includes(lower)) this.removed.push(lower);
    if (this.added.some(([n]) => n === lower)) {
      this.added = this.added.filter(([n]) => n !== lower);
    }
  }

  add(name: string, value: string, holdsSecret = false): void {
    // As rendered: a value with a control character is refused where the edge writes the head
    // (the ingress's http-policy-lean.ts, lean-response-phase.ts), never cleaned into another value.
    this.net = undefined;
    const pair: [string, string] = [name.toLowerCase(), value];
    this.added.push(pair);
    if (holdsSecret) (this.secret ??= new Set()).add(pair);
  }

  /** The net changes, for a decision. */
  changes(): HeaderChanges {
    if (this.empty) return NO_HEADER_CHANGES;
    return (this.net ??= { remove: this.removed, add: this.added });
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
 * The values of the lower-case `name` in `raw`, as in the header object built from it: one value
 * (repeats joined with `, `), or each `set-cookie`; undefined when absent.
 */
function rawValues(raw: RawHeaders, name: string): string[] | undefined {
  let values: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const key = raw[i]!;
    if (key.length !== name.length || key.toLowerCase() !== name) continue;
    const value = raw[i + 1]!;
    if (values === undefined) values = [value];
    else if (name === 'set-cookie') values.push(value);
    else values[0] = `${values[0]}, ${value}`;
  }
  return values;
}

/**
 * The values of the lower-case header `name` in `input`, as `req.headers[name]` holds them before
 * any change; empty when absent.
 * @example headerValues(['Set-Cookie', 'a', 'set-cookie', 'b'], 'set-cookie') // ['a', 'b']
 */
export function headerValues(input: MessageHeaders, name: string): string[] {
  if (isRaw(input)) return rawValues(input, name) ?? [];
  const value = input[name];
  if (value === undefined) return [];
  return typeof value === 'object' ? [...value] : [String(value)];
}

function isRaw(input: MessageHeaders): input is RawHeaders {
  return Array.isArray(input);
}

/**
 * The header map CEL sees (`req.headers`, `res.headers`): lower-case names to lists of values,
 * with `changes` applied, so a rule sees what earlier actions did.
 * @example headerMap({ 'x-a': '1', 'set-cookie': ['a', 'b'] }).get('set-cookie') // ['a', 'b']
 */
export function headerMap(
  input: MessageHeaders,
  changes: HeaderChanges = NO_HEADER_CHANGES,
): Map<string, string[]> {
  const map = new Map<string, string[]>();
  const removed = changes.remove;
  if (isRaw(input)) {
    for (let i = 0; i < input.length; i += 2) {
      const lower = input[i]!.toLowerCase();
      if (removed.length > 0 && removed.includes(lower)) continue;
      const value = input[i + 1]!;
      const existing = map.get(lower);
      if (existing === undefined) map.set(lower, [value]);
      else if (lower === 'set-cookie') existing.push(value);
      else existing[0] = `${existing[0]}, ${value}`;
    }
  } else {
    for (const name in input) {
      const value = input[name];
      if (value === undefined) continue;
      const lower = name.toLowerCase();
      if (removed.includes(lower)) continue;
      const values = typeof value === 'object' ? [...value] : [String(value)];
      const existing = map.get(lower);
      if (existing) existing.push(...values);
      else map.set(lower, values);
    }
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
export function firstHeader(input: MessageHeaders, name: string): string | undefined {
  const lower = name.toLowerCase();
  if (isRaw(input)) return rawValues(input, lower)?.[0];
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

type Lookups = Pick<Map<string, unknown>, 'get' | 'has'>;

/** Per normalizer, one pair of lookups shared by every map it serves (`this` is the map). */
const lookupsOf = new WeakMap<(key: string) => string, Lookups>();

/**
 * `map` with lookups (`[]`, `in`, `has()`) that ignore the key's case: `req.headers['X-Api-Version']`
 * finds the header the map keeps as `x-api-version`, as users copying ngrok's examples expect.
 * CEL reads maps by `get` and knows them by their constructor (Map), so the lookups are replaced
 * on the instance rather than by a subclass; they are made once per `normalize` (the key the map
 * is keyed by: pass the same function every time), not once per map, which is built per request.
 */
export function caseInsensitiveLookups<V>(
  map: Map<string, V>,
  normalize: (key: string) => string,
): Map<string, V> {
  let lookups = lookupsOf.get(normalize);
  if (lookups === undefined) {
    lookups = {
      get(this: Map<string, unknown>, key: string): unknown {
        const found: unknown = Map.prototype.get.call(this, key);
        if (found !== undefined && found !== null) return found;
        return typeof key === 'string'
          ? (Map.prototype.get.call(this, normalize(key)) as unknown)
          : undefined;
      },
      has(this: Map<string, unknown>, key: string): boolean {
        if (Map.prototype.has.call(this, key)) return true;
        return typeof key === 'string' && Map.prototype.has.call(this, normalize(key));
      },
    };
    lookupsOf.set(normalize, lookups);
  }
  map.get = lookups.get as Map<string, V>['get'];
  map.has = lookups.has;
  return map;
}
