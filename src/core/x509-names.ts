/**
 * Subject alternative names as Node writes them (`X509Certificate.subjectAltName`,
 * `PeerCertificate.subjectaltname`), read in one place and into the vocabulary of @peculiar/x509
 * (whose SubjectAlternativeNameExtension reads them from a certificate's DER): the same kinds, IPv6
 * addresses in the same short form. Used where a certificate is at hand only as Node parsed it, or
 * where parsing its DER again would cost too much (a client certificate, per connection).
 */

import { isIP } from 'node:net';
import { formatIpv6, ipv6ToBigInt } from './cidr.js';

/** One subject alternative name. */
export interface AltName {
  /**
   * Its kind as @peculiar/x509's GeneralName names it: `dns`, `ip`, `email`, `url`, `dn`, `id`;
   * other kinds keep Node's word (`othername`).
   */
  type: string;
  /** As written in the certificate, unquoted; an IPv6 address in its short form (`2001:db8::1`). */
  value: string;
}

const TYPES: Readonly<Record<string, string>> = {
  DNS: 'dns',
  'IP Address': 'ip',
  email: 'email',
  URI: 'url',
  DirName: 'dn',
  'Registered ID': 'id',
};

/**
 * `2001:DB8:0:0:0:0:0:1` (how Node writes an IPv6 name) as `2001:db8::1`, as @peculiar/x509 writes
 * it (an IPv4-mapped address too: `::ffff:c000:201`); other text (IPv4) as it is.
 * @example shortIpv6('0:0:0:0:0:FFFF:C000:201') // '::ffff:c000:201'
 */
export function shortIpv6(text: string): string {
  if (!text.includes(':') || text.includes('%') || isIP(text) !== 6) return text;
  return formatIpv6(ipv6ToBigInt(text), 'hex');
}

/**
 * The names of Node's `subjectAltName` text, in order. Node joins them with `, ` and writes a value
 * that has a comma, quote or control character as a JSON string (`DNS:"a\u002cb"`), so splitting
 * is exact.
 * @example splitSubjectAltName('DNS:a.example, IP Address:0:0:0:0:0:0:0:1') // [{ type: 'dns', value: 'a.example' }, { type: 'ip', value: '::1' }]
 */
export function splitSubjectAltName(text: string | undefined): AltName[] {
  if (!text) return [];
  const names: AltName[] = [];
  for (const entry of text.split(', ')) {
    const colon = entry.indexOf(':');
    if (colon <= 0) continue;
    const kind = entry.slice(0, colon);
    let value = entry.slice(colon + 1);
    if (value.startsWith('"')) {
      try {
        value = JSON.parse(value) as string;
      } catch {
        // Keep it as written.
      }
    }
    const type = TYPES[kind] ?? kind;
    names.push({ type, value: type === 'ip' ? shortIpv6(value) : value });
  }
  return names;
}
