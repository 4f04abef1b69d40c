import type { X509Certificate } from 'node:crypto';
import { splitSubjectAltName } from '../core/x509-names.js';

/**
 * `conn.tls.client`: the client certificate of a connection whose TLS ended at the edge
 * (terminate-tls), as policies see it; read lazily, field group by field group.
 */

/**
 * The attributes of a certificate's subject or issuer, as Node writes them (`CN=alice\nO=Acme\, Inc.`):
 * the first value of each, escapes undone.
 */
function nameAttributes(text: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of (text ?? '').split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    if (!out.has(key)) out.set(key, line.slice(eq + 1).replace(/\\(.)/g, '$1'));
  }
  return out;
}

/**
 * The fields of `conn.tls.client.subject` and `.issuer`, each with the attribute Node names it by.
 * @example TLS_NAME_ATTRIBUTES.common_name // 'CN'
 */
export const TLS_NAME_ATTRIBUTES = {
  common_name: 'CN',
  organization: 'O',
  organizational_unit: 'OU',
  country: 'C',
  locality: 'L',
  province: 'ST',
  street_address: 'street',
  postal_code: 'postalCode',
} as const;

/** `conn.tls.client.subject`, `conn.tls.client.issuer`: a distinguished name's attributes ('' when absent). */
export class TlsNameVars {
  // Set in the constructor from TLS_NAME_ATTRIBUTES.
  declare readonly common_name: string;
  declare readonly organization: string;
  declare readonly organizational_unit: string;
  declare readonly country: string;
  declare readonly locality: string;
  declare readonly province: string;
  declare readonly street_address: string;
  declare readonly postal_code: string;
  constructor(text: string | undefined) {
    const attrs = nameAttributes(text);
    const self = this as unknown as Record<string, string>;
    for (const [field, attr] of Object.entries(TLS_NAME_ATTRIBUTES)) {
      self[field] = attrs.get(attr) ?? '';
    }
  }
}

/** `conn.tls.client.san`: the subject alternative names, by kind. */
export class TlsSanVars {
  readonly dns_names: string[] = [];
  readonly email_addresses: string[] = [];
  readonly ip_addresses: string[] = [];
  readonly uris: string[] = [];
  constructor(text: string | undefined) {
    // From Node's text: reading the DER again with @peculiar/x509 would cost about 1 ms per
    // connection instead of a microsecond.
    const kinds: Record<string, string[]> = {
      dns: this.dns_names,
      email: this.email_addresses,
      ip: this.ip_addresses,
      url: this.uris,
    };
    for (const name of splitSubjectAltName(text)) kinds[name.type]?.push(name.value);
  }
}

/** `conn.tls.client.validity`. */
export class TlsValidityVars {
  constructor(
    readonly not_before: Date,
    readonly not_after: Date,
  ) {}
}

const EPOCH = new Date(0);

/**
 * `conn.tls.client`: the client certificate of a connection whose TLS ended at the edge
 * (terminate-tls with mutual TLS); every field empty when there is none.
 */
export class TlsClientVars {
  readonly #cert: X509Certificate | undefined;
  #subject: TlsNameVars | undefined;
  #issuer: TlsNameVars | undefined;
  #san: TlsSanVars | undefined;
  #validity: TlsValidityVars | undefined;
  constructor(cert: X509Certificate | undefined) {
    this.#cert = cert;
  }
  get subject(): TlsNameVars {
    return (this.#subject ??= new TlsNameVars(this.#cert?.subject));
  }
  get issuer(): TlsNameVars {
    return (this.#issuer ??= new TlsNameVars(this.#cert?.issuer));
  }
  get san(): TlsSanVars {
    return (this.#san ??= new TlsSanVars(this.#cert?.subjectAltName));
  }
  /** Hex, upper case, as OpenSSL prints it. */
  get serial_number(): string {
    return this.#cert?.serialNumber ?? '';
  }
  /** SHA-256 of the DER certificate, hex pairs separated by colons. */
  get fingerprint(): string {
    return this.#cert?.fingerprint256 ?? '';
  }
  get validity(): TlsValidityVars {
    const cert = this.#cert;
    return (this.#validity ??= cert
      ? new TlsValidityVars(new Date(cert.validFrom), new Date(cert.validTo))
      : new TlsValidityVars(EPOCH, EPOCH));
  }
}
