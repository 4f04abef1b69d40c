/**
 * One reading of an HTTP request target, made once before policy and routing, so that what a
 * traffic policy judges (`req.url.path`), what routes the request and what the service receives
 * are the same path. Services do not all read a target the same way: Express, Go's net/http and
 * nginx take the path of `GET http://host/admin` as `/admin`, and many resolve `/x/../admin` or
 * `/%2e/admin` to `/admin`. A reverse proxy that judges the text as sent and forwards it unchanged
 * can be walked around; so the edge reads the target here and forwards what it read.
 *
 * The rules (docs/security.md, "One reading of the request target"):
 * - origin-form (`/path?query`) is the form written to the service;
 * - absolute-form (`http://host[:port]/path?query`, `https://…`) becomes origin-form; its host is
 *   the host that routes, so a Host header naming another host is refused (RFC 9112 §3.2.2 lets
 *   the target's authority replace Host; Burrow refuses the disagreement instead of choosing);
 *   userinfo (`http://user@host/`) is refused (RFC 9110 §4.2.4), other schemes too;
 * - authority-form (CONNECT) and asterisk-form (`OPTIONS *`) are refused: Burrow is no forward
 *   proxy, and a tunnel's service answers for its resources, not for the server;
 * - in the path, percent-encoded unreserved characters are decoded (RFC 3986 §6.2.2.2: `%2e` is
 *   `.`, `%41` is `A`), then dot segments are removed (RFC 3986 §5.2.4);
 * - an encoded slash (`%2F`) is kept as sent: it is not a segment separator here, and the service
 *   gets it encoded. A path in which decoding it would make a dot segment (`/a%2f..%2fb`) is
 *   refused, since services disagree on whether `%2F` separates segments;
 * - a fragment (`#`), a backslash in the path, a malformed percent-encoding and any control
 *   character or space are refused; the query is passed on as sent.
 */
import { isTargetText } from './http-wire.js';
import { hostOf, parseHostPort } from './host-port.js';
import { normalizeName } from './hostname.js';

/** A target read: the origin-form to judge, route and write; or why it is refused (a 400). */
export type TargetReading = { target: string } | { problem: string };

/** unreserved (RFC 3986 §2.3) by character code: these are decoded when percent-encoded. */
const UNRESERVED = new Uint8Array(128);
for (const c of '-._~') UNRESERVED[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) UNRESERVED[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) UNRESERVED[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) UNRESERVED[c] = 1;

const ABSOLUTE = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)(.*)$/s;
/** A dot segment once `%2F` counts as a slash. */
const ENCODED_SLASH_DOTS = /(?:^|\/|%2f)\.{1,2}(?:$|\/|%2f)/i;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * `path` with percent-encoded unreserved characters decoded; undefined when a `%` is not followed
 * by two hex digits.
 */
function decodeUnreserved(path: string): string | undefined {
  let percent = path.indexOf('%');
  if (percent < 0) return path;
  let out = '';
  let from = 0;
  while (percent >= 0) {
    const hi = hexValue(path.charCodeAt(percent + 1));
    const lo = hexValue(path.charCodeAt(percent + 2));
    if (hi < 0 || lo < 0) return undefined;
    const c = hi * 16 + lo;
    if (c < 128 && UNRESERVED[c] === 1) {
      out += path.slice(from, percent) + String.fromCharCode(c);
      from = percent + 3;
    }
    percent = path.indexOf('%', percent + 3);
  }
  return out + path.slice(from);
}

/**
 * `path` (absolute, starting with `/`) with its dot segments removed, as RFC 3986 §5.2.4 does.
 * @example removeDotSegments('/a/b/../c/./d') // '/a/c/d'
 */
export function removeDotSegments(path: string): string {
  if (!path.includes('/.')) return path;
  const input = path.split('/');
  const out: string[] = [];
  for (let i = 1; i < input.length; i++) {
    const segment = input[i]!;
    const last = i === input.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') out.pop();
      // A trailing dot segment leaves the directory: `/a/b/..` is `/a/`.
      if (last) out.push('');
      continue;
    }
    out.push(segment);
  }
  return `/${out.join('/')}`;
}

/**
 * Read an origin-form target (`/path?query`): the path normalized as the module says, the query
 * as sent. Also used on what a url-rewrite produced, so a rewrite is held to the same rules.
 * @example normalizeOriginForm('/x/%2e%2e/admin?a=1') // { target: '/admin?a=1' }
 */
export function normalizeOriginForm(target: string): TargetReading {
  if (!isTargetText(target)) {
    return { problem: 'a space or control character in the request target' };
  }
  if (target.charCodeAt(0) !== 0x2f /* / */) {
    return { problem: 'a request target that does not start with /' };
  }
  if (target.includes('#')) return { problem: 'a fragment (#) in the request target' };
  const q = target.indexOf('?');
  const rawPath = q < 0 ? target : target.slice(0, q);
  if (rawPath.includes('\\')) return { problem: 'a backslash in the request path' };
  const decoded = decodeUnreserved(rawPath);
  if (decoded === undefined) return { problem: 'a malformed percent-encoding in the request path' };
  const path = removeDotSegments(decoded);
  if (path.includes('%') && ENCODED_SLASH_DOTS.test(path)) {
    return { problem: 'an encoded slash (%2F) next to a dot segment in the request path' };
  }
  if (q < 0) return { target: path };
  return { target: path === rawPath ? target : path + target.slice(q) };
}

/**
 * The routing name of a Host header or an authority: lower case, no port, no trailing dot (an
 * IPv6 literal keeps its brackets), as the ingress routes by.
 * @example hostName('App.Example.com.:8080') // 'app.example.com'
 */
export function hostName(hostport: string): string {
  return normalizeName(hostOf(hostport));
}

/**
 * Read a request target as received with `method` and Host header `host`: origin-form as
 * {@link normalizeOriginForm}; absolute-form to its origin-form, refused when its host is not the
 * Host header's; authority-form, asterisk-form and anything else refused.
 * @example readRequestTarget('GET', 'https://a.example:8443/x/../admin', 'a.example') // { target: '/admin' }
 * @example readRequestTarget('GET', 'http://b.example/', 'a.example') // { problem: … }
 */
export function readRequestTarget(
  method: string,
  target: string,
  host: string | undefined,
): TargetReading {
  if (method === 'CONNECT') {
    return { problem: 'CONNECT (an authority-form target): this edge is not a forward proxy' };
  }
  const first = target.charCodeAt(0);
  if (first === 0x2f /* / */) return normalizeOriginForm(target);
  if (target === '*') {
    return { problem: 'an asterisk-form target (OPTIONS *): ask a resource instead' };
  }
  const absolute = ABSOLUTE.exec(target);
  if (!absolute) return { problem: 'a request target that is neither a path nor an http(s) URL' };
  const scheme = absolute[1]!.toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') {
    return { problem: `a request target with the scheme ${scheme}: only http and https` };
  }
  const authority = absolute[2]!;
  if (authority.includes('@')) return { problem: 'userinfo (user@) in the request target' };
  const name = hostName(authority);
  if (name === '' || !isTargetText(authority) || !parseHostPort(authority, { port: 'optional' })) {
    return { problem: 'a request target URL without a valid host' };
  }
  if (host !== undefined && hostName(host) !== name) {
    return { problem: 'a request target URL whose host is not the Host header' };
  }
  const rest = absolute[3]!;
  return normalizeOriginForm(rest === '' || rest.startsWith('?') ? `/${rest}` : rest);
}
