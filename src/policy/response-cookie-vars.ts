import { Duration } from '@marcbachmann/cel-js/evaluator';

/**
 * `res.cookies`: the cookies a response sets (its Set-Cookie headers, RFC 6265 section 5.2), with
 * their attributes, as ngrok's response variables reference lists them.
 */

/** At most this many Set-Cookie headers are read from a response (the rest are not visible). */
const MAX_SET_COOKIES = 64;

/** One cookie a response sets: `res.cookies['session'][0].http_only`. */
export class ResponseCookieVars {
  domain = '';
  path = '';
  /** The epoch (1970) without an `Expires` attribute or with one that is not a date. */
  expires = new Date(0);
  /** Zero without a `Max-Age` attribute. */
  max_age = new Duration(0);
  secure = false;
  http_only = false;
  /** As written (`Lax`, `Strict`, `None`); `''` without it. */
  same_site = '';
  /** Attributes the fields above do not cover, by name as written (`Partitioned` → `''`). */
  readonly unparsed_attributes = new Map<string, string>();
  constructor(
    readonly name: string,
    readonly value: string,
  ) {}
}

/** Apply attribute `name` (any case) with `value` to `cookie`. */
function applyAttribute(cookie: ResponseCookieVars, name: string, value: string): void {
  switch (name.toLowerCase()) {
    case 'domain':
      cookie.domain = value.replace(/^\./, '').toLowerCase();
      return;
    case 'path':
      cookie.path = value;
      return;
    case 'expires': {
      const at = Date.parse(value);
      cookie.expires = new Date(Number.isNaN(at) ? 0 : at);
      return;
    }
    case 'max-age':
      if (/^-?\d{1,15}$/.test(value)) cookie.max_age = new Duration(BigInt(value));
      return;
    case 'secure':
      cookie.secure = true;
      return;
    case 'httponly':
      cookie.http_only = true;
      return;
    case 'samesite':
      cookie.same_site = value;
      return;
    default:
      cookie.unparsed_attributes.set(name, value);
  }
}

/**
 * The cookies of Set-Cookie header values by name; several of one name are ordered by path
 * length, longest first (as ngrok orders them). A header without `name=` is skipped.
 * @example parseSetCookies(['a=1; Path=/; HttpOnly']).get('a')?.[0]?.http_only // true
 */
export function parseSetCookies(headers: readonly string[]): Map<string, ResponseCookieVars[]> {
  const cookies = new Map<string, ResponseCookieVars[]>();
  for (const header of headers.slice(0, MAX_SET_COOKIES)) {
    const [pair = '', ...attributes] = header.split(';');
    const eq = pair.indexOf('=');
    const name = eq < 0 ? '' : pair.slice(0, eq).trim();
    if (name === '') continue;
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
      value = value.slice(1, -1);
    const cookie = new ResponseCookieVars(name, value);
    for (const attribute of attributes) {
      const at = attribute.indexOf('=');
      const key = (at < 0 ? attribute : attribute.slice(0, at)).trim();
      if (key !== '') applyAttribute(cookie, key, at < 0 ? '' : attribute.slice(at + 1).trim());
    }
    const list = cookies.get(name);
    if (list) list.push(cookie);
    else cookies.set(name, [cookie]);
  }
  for (const list of cookies.values()) list.sort((a, b) => b.path.length - a.path.length);
  return cookies;
}

/** The CEL fields of {@link ResponseCookieVars} (cel-types.ts declares them). */
export const RESPONSE_COOKIE_FIELDS: Record<string, string> = {
  name: 'string',
  value: 'string',
  domain: 'string',
  path: 'string',
  expires: 'google.protobuf.Timestamp',
  max_age: 'google.protobuf.Duration',
  secure: 'bool',
  http_only: 'bool',
  same_site: 'string',
  unparsed_attributes: 'map<string, string>',
};
