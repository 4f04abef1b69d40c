import { isIP } from 'node:net';

/**
 * DNS names as Burrow accepts them: lowercase LDH labels of 1-63 characters, at most 253 in all,
 * at least two labels. A wildcard `*` may only be the whole first label.
 */
const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type HostnameProblem = 'empty' | 'too-long' | 'bad-label' | 'single-label' | 'wildcard';

/** Why `name` is not an acceptable (optionally wildcard) hostname, or undefined when it is. */
export function hostnameProblem(name: string, allowWildcard: boolean): HostnameProblem | undefined {
  if (name.length === 0) return 'empty';
  if (name.length > 253) return 'too-long';
  const labels = name.split('.');
  // Characters first: 'bad domain!' is told its label is bad, not that it lacks a second one.
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    if (label === '*') {
      if (i !== 0 || !allowWildcard) return 'wildcard';
      continue;
    }
    if (label.includes('*')) return 'wildcard';
    if (!LABEL_RE.test(label)) return 'bad-label';
  }
  if (labels.length < 2 || (labels[0] === '*' && labels.length < 3)) return 'single-label';
  return undefined;
}

/**
 * Lowercase, without one trailing root dot: the form names are compared and looked up in. It does
 * not trim (callers whose input may carry spaces trim first); no regex, and a second string only
 * when there is a dot to drop, so the per-request SNI check may use it.
 * @example normalizeName('App.Example.COM.') // 'app.example.com'
 */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** True when `name` is `suffix` itself or any name at any depth under it. */
export function isAtOrUnder(name: string, suffix: string): boolean {
  return name === suffix || name.endsWith('.' + suffix);
}

/**
 * True when a reserved `domain` (possibly `*.x.y`) covers `name`: equal, or, for a wildcard,
 * any name at any depth under its suffix.
 * @example domainCovers('*.sitea.example.com', 'dev1.sitea.example.com') // true
 */
export function domainCovers(domain: string, name: string): boolean {
  if (domain === name) return true;
  if (!domain.startsWith('*.')) return false;
  return name.endsWith(domain.slice(1));
}

/**
 * The one wildcard lookup of names to what serves them: among wildcards kept by their suffix
 * (`*.example.com` as `.example.com`), the one with the longest suffix of `name`, at any depth.
 * Exact names are looked up before this, by the caller's own map.
 * @example longestWildcard('a.b.example.com', new Map([['.example.com', 1], ['.b.example.com', 2]])) // 2
 */
export function longestWildcard<T>(name: string, bySuffix: ReadonlyMap<string, T>): T | undefined {
  if (bySuffix.size === 0) return undefined;
  for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
    const hit = bySuffix.get(name.slice(dot));
    if (hit !== undefined) return hit;
  }
  return undefined;
}

/**
 * True when `name` is exactly one label under `domain`: what a certificate for `*.<domain>`
 * covers, and the shape of random endpoint names under the base domain.
 * @example isOneLabelUnder('app.example.com', 'example.com') // true
 * @example isOneLabelUnder('a.b.example.com', 'example.com') // false
 */
export function isOneLabelUnder(name: string, domain: string): boolean {
  return name.endsWith(`.${domain}`) && !name.slice(0, -domain.length - 1).includes('.');
}

/**
 * True when certificate name `san` covers host `name` as TLS clients match: exactly, or a
 * wildcard standing for one label (never for an IP address).
 * @example certificateNameCovers('*.example.com', 'app.example.com') // true
 * @example certificateNameCovers('*.example.com', 'a.b.example.com') // false
 */
export function certificateNameCovers(san: string, name: string): boolean {
  if (san === name) return true;
  return san.startsWith('*.') && isIP(name) === 0 && isOneLabelUnder(name, san.slice(2));
}

/**
 * True for a loopback host: `localhost`, `::1` (bracketed or not, as URL.hostname gives it) or an
 * IPv4 address in 127.0.0.0/8.
 * @example isLoopbackHost('127.0.0.2') // true
 */
export function isLoopbackHost(host: string): boolean {
  return (
    host === 'localhost' ||
    host === '::1' ||
    host === '[::1]' ||
    (isIP(host) === 4 && host.startsWith('127.'))
  );
}

/**
 * `text` as a URL when it is https, or http on a loopback host (tests, local providers), without
 * a fragment and, unless `allowQuery`, without a query; else undefined. For the URLs of identity
 * providers, which carry credentials.
 * @example secureOrLoopbackUrl('http://127.0.0.1:8080/idp', false)?.href // 'http://127.0.0.1:8080/idp'
 * @example secureOrLoopbackUrl('http://id.example', false) // undefined
 */
export function secureOrLoopbackUrl(text: string, allowQuery: boolean): URL | undefined {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (!url || url.hash !== '' || (!allowQuery && url.search !== '')) return undefined;
  if (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    return url;
  }
  return undefined;
}
