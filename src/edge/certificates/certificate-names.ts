import { isIP } from 'node:net';

/**
 * Names as they go into a certificate's subjectAltName. Looser than reserved-domain names
 * (src/core/hostname.ts): single labels such as `localhost` and IP literals are fine here.
 */
const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Lowercase, without a trailing dot or IPv6 brackets: the form names are compared and cached in.
 * @example normalizeCertificateName('App.Example.COM.') // 'app.example.com'
 * @example normalizeCertificateName('[::1]') // '::1'
 */
export function normalizeCertificateName(name: string): string {
  let n = name.trim().toLowerCase();
  if (n.startsWith('[') && n.endsWith(']')) n = n.slice(1, -1);
  if (n.endsWith('.') && isIP(n) === 0) n = n.slice(0, -1);
  return n;
}

/**
 * True for an IPv4 or IPv6 literal (which goes into an iPAddress SAN, not a dNSName one).
 * @example isIpLiteral('127.0.0.1') // true
 */
export function isIpLiteral(name: string): boolean {
  return isIP(name) !== 0;
}

/**
 * Why `name` (already normalized) cannot be a SAN, or undefined when it can. A wildcard `*` is
 * only allowed as the whole first label, above at least two more labels (`*.example.com`), as
 * browsers refuse wildcards directly under a top-level domain.
 * @example certificateNameProblem('*.sitea.example.com') // undefined
 * @example certificateNameProblem('a.*.example.com') // 'a wildcard `*` may only be the whole first label'
 */
export function certificateNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'the name is empty';
  if (isIpLiteral(name)) return undefined;
  if (name.length > 253) return 'a DNS name is at most 253 characters';
  const labels = name.split('.');
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    if (label === '*' && i === 0) {
      if (labels.length < 3) return 'a wildcard needs at least two labels after `*.`';
      continue;
    }
    if (label.includes('*')) return 'a wildcard `*` may only be the whole first label';
    if (!LABEL_RE.test(label)) {
      return `label "${label}" must be 1-63 letters, digits or inner hyphens`;
    }
  }
  return undefined;
}

/**
 * The SAN list to issue for `name` when it falls under a wildcard-reserved `wildcardDomain`: a
 * name exactly one label below gets the wildcard itself (one certificate serves every such
 * subdomain); deeper names get their own, since a certificate wildcard covers one label only.
 * @example wildcardSanFor('dev1.sitea.example.com', '*.sitea.example.com') // ['*.sitea.example.com']
 * @example wildcardSanFor('a.b.sitea.example.com', '*.sitea.example.com') // ['a.b.sitea.example.com']
 */
export function wildcardSanFor(name: string, wildcardDomain: string): string[] {
  if (!wildcardDomain.startsWith('*.')) return [name];
  const suffix = wildcardDomain.slice(1);
  if (!name.endsWith(suffix)) return [name];
  const head = name.slice(0, -suffix.length);
  return head.length > 0 && !head.includes('.') ? [wildcardDomain] : [name];
}

/**
 * Normalize, validate and de-duplicate a SAN list, keeping the caller's order (the first name
 * becomes the subject CN). Throws a TypeError naming the bad name.
 * @example canonicalCertificateNames(['Localhost', 'localhost', '[::1]']) // ['localhost', '::1']
 */
export function canonicalCertificateNames(names: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of names) {
    const name = normalizeCertificateName(raw);
    const problem = certificateNameProblem(name);
    if (problem) throw new TypeError(`cannot issue a certificate for "${raw}": ${problem}`);
    if (!out.includes(name)) out.push(name);
  }
  if (out.length === 0) throw new TypeError('a certificate needs at least one name');
  return out;
}
