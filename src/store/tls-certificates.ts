import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
// @peculiar/x509's dependency injection (tsyringe) needs the Reflect metadata API loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { certificateNameCovers } from '../core/hostname.js';
import { shortIpv6, splitSubjectAltName, type AltName } from '../core/x509-names.js';
import type { RepoDeps } from './deps.js';
import {
  describedChanges,
  describedColumns,
  type DescribedInput,
  describedOf,
} from './described.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';
import type { TlsCertificatesTable } from './schema.js';

/** A certificate as the API shows it: everything but the private key. */
export interface TlsCertificate {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  certificate_pem: string;
  subject_common_name: string;
  subject_alternative_names: { dns_names: string[]; ips: string[] };
  issuer_common_name: string;
  serial_number: string;
  not_before: string;
  not_after: string;
  private_key_type: string;
  /** Null when uploaded; the ACME subject when Burrow ordered it. */
  managed_by: string | null;
}

export interface TlsCertificateCreate extends DescribedInput {
  certificate_pem: string;
  private_key_pem: string;
}

/** What a TLS listener needs to serve a stored certificate. */
export interface ServableCertificate {
  id: string;
  certificatePem: string;
  privateKeyPem: string;
  dnsNames: string[];
  notAfter: Date;
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

function keyTypeOf(key: KeyObject): string | undefined {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return 'rsa';
    case 'ec':
      return 'ecdsa';
    case 'ed25519':
      return 'ed25519';
    default:
      return undefined;
  }
}

type ParsedCertificate = Omit<
  TlsCertificatesTable,
  'id' | 'description' | 'metadata' | 'created_at' | 'managed_by'
>;

/**
 * Check a certificate chain (leaf first) and its private key, and read the fields the API shows.
 * Throws ValidationErrors naming `certificate_pem` or `private_key_pem`; never quotes the key.
 * @example parseCertificateAndKey(chainPem, keyPem).dns_names // '["app.example.com"]'
 */
export function parseCertificateAndKey(certificatePem: string, keyPem: string): ParsedCertificate {
  const certField = 'certificate_pem';
  const blocks = [...certificatePem.matchAll(PEM_BLOCK)];
  if (blocks.length === 0 || blocks.some((b) => b[1] !== 'CERTIFICATE')) {
    throw new ValidationError(
      CODES.invalidCertificatePem,
      certField,
      blocks.some((b) => b[1]!.includes('PRIVATE KEY'))
        ? 'must hold only certificates (leaf first, then intermediates); send the key in private_key_pem'
        : 'must be one or more certificates in PEM form, the leaf first, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----',
    );
  }
  let chain: X509Certificate[];
  try {
    chain = blocks.map((b) => new X509Certificate(b[0]));
  } catch {
    throw new ValidationError(
      CODES.invalidCertificatePem,
      certField,
      'a CERTIFICATE block is not a valid X.509 certificate',
    );
  }
  const leaf = chain[0]!;
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new ValidationError(
      CODES.invalidPrivateKeyPem,
      'private_key_pem',
      'must be an unencrypted private key in PEM form (-----BEGIN PRIVATE KEY----- or the RSA/EC forms)',
    );
  }
  const keyType = keyTypeOf(key);
  if (!keyType) {
    throw new ValidationError(
      CODES.invalidPrivateKeyPem,
      'private_key_pem',
      `must be an RSA, ECDSA or Ed25519 key, not ${key.asymmetricKeyType ?? 'unknown'}`,
    );
  }
  if (!leaf.checkPrivateKey(key)) {
    throw new ValidationError(
      CODES.certificateKeyMismatch,
      'private_key_pem',
      "does not belong to the certificate: the first certificate in certificate_pem must be the key's own",
    );
  }
  let cert: x509.X509Certificate;
  let commonName = '';
  let issuerName = '';
  try {
    // Names read from the DER as stored (Node's text escapes them and joins them with commas).
    cert = new x509.X509Certificate(leaf.raw);
    // The subject's last CN is the most specific; the issuer is named by its first.
    commonName = cert.subjectName.getField('CN').at(-1) ?? '';
    issuerName = cert.issuerName.getField('CN')[0] ?? '';
  } catch {
    throw new ValidationError(
      CODES.invalidCertificatePem,
      certField,
      'the certificate could not be read: its DER encoding is malformed',
    );
  }
  const dnsNames: string[] = [];
  const ips: string[] = [];
  for (const name of altNames(cert, leaf)) {
    if (name.type === 'dns') dnsNames.push(name.value.toLowerCase());
    else if (name.type === 'ip') ips.push(name.value);
  }
  if (dnsNames.length === 0 && ips.length === 0) {
    throw new ValidationError(
      CODES.invalidCertificatePem,
      certField,
      'the certificate names no host: it needs subject alternative names (DNS or IP), which clients require',
    );
  }
  return {
    certificate_pem: chain.map((c) => c.toString()).join(''),
    private_key_pem: key.export({ type: 'pkcs8', format: 'pem' }).toString(),
    private_key_type: keyType,
    subject_common_name: commonName,
    dns_names: JSON.stringify(dnsNames),
    ips: JSON.stringify(ips),
    issuer_common_name: issuerName,
    serial_number: leaf.serialNumber.toLowerCase(),
    not_before: nowRfc3339(new Date(leaf.validFrom)),
    not_after: nowRfc3339(new Date(leaf.validTo)),
  };
}

/**
 * The subject alternative names of `cert`, from its DER; when @peculiar/x509 cannot read its
 * extensions (a certificate Node and clients take), as Node read them.
 */
function altNames(cert: x509.X509Certificate, leaf: X509Certificate): readonly AltName[] {
  try {
    return cert.getExtension(x509.SubjectAlternativeNameExtension)?.names.items ?? [];
  } catch {
    return splitSubjectAltName(leaf.subjectAltName);
  }
}

function toView(row: TlsCertificatesTable): TlsCertificate {
  return {
    id: row.id,
    ...describedOf(row),
    certificate_pem: row.certificate_pem,
    subject_common_name: row.subject_common_name,
    subject_alternative_names: {
      dns_names: JSON.parse(row.dns_names) as string[],
      // Rows stored before the names came from the DER hold Node's long IPv6 form.
      ips: (JSON.parse(row.ips) as string[]).map(shortIpv6),
    },
    issuer_common_name: row.issuer_common_name,
    serial_number: row.serial_number,
    not_before: row.not_before,
    not_after: row.not_after,
    private_key_type: row.private_key_type,
    managed_by: row.managed_by,
  };
}

/**
 * TLS certificates: uploaded through the API, or issued by ACME for reserved domains and the base
 * domain. Private keys go in and never come out, except to the edge through `servableFor`.
 * @example const cert = await certs.create({ certificate_pem, private_key_pem });
 */
export class TlsCertificateRepository extends ResourceRepository<
  'tls_certificates',
  TlsCertificate
> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'tls_certificates', toView);
  }

  /** Store a certificate; `managedBy` marks one Burrow ordered (see TlsCertificatesTable). */
  async create(input: TlsCertificateCreate, managedBy: string | null = null) {
    const parsed = parseCertificateAndKey(input.certificate_pem, input.private_key_pem);
    const row: TlsCertificatesTable = {
      id: newId(ID_PREFIX.tlsCertificate),
      ...describedColumns(input),
      ...parsed,
      managed_by: managedBy,
    };
    await this.db.insertInto('tls_certificates').values(row).execute();
    return toView(row);
  }

  async update(id: string, patch: DescribedInput): Promise<TlsCertificate | undefined> {
    await this.writeColumns(id, describedChanges(patch));
    return this.get(id);
  }

  /** Delete; false when absent. Refused while a reserved domain serves it. */
  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      const user = await trx
        .selectFrom('reserved_domains')
        .select(['id', 'domain'])
        .where('certificate_id', '=', id)
        .executeTakeFirst();
      if (user) {
        throw new ConflictError(
          CODES.certificateInUse,
          `The certificate ${id} is served for the reserved domain ${user.domain} (${user.id}). Detach it first with DELETE /reserved_domains/${user.id}/certificate.`,
        );
      }
    });
  }

  /** The newest certificate Burrow ordered for `managedBy`, if any. */
  async latestManaged(managedBy: string): Promise<TlsCertificate | undefined> {
    const row = await this.db
      .selectFrom('tls_certificates')
      .selectAll()
      .where('managed_by', '=', managedBy)
      .orderBy('id', 'desc')
      .executeTakeFirst();
    return row && toView(row);
  }

  /** Delete certificates Burrow ordered for `managedBy` other than `keepId` (replaced ones). */
  async deleteManagedExcept(managedBy: string, keepId: string): Promise<void> {
    await this.db
      .deleteFrom('tls_certificates')
      .where('managed_by', '=', managedBy)
      .where('id', '!=', keepId)
      .execute();
  }

  /**
   * The certificate to serve for host `name`: among unexpired ones whose names cover it, the one
   * that expires last. Undefined when none does.
   * @example const served = await certs.servableFor('app.example.com');
   */
  async servableFor(name: string, now = new Date()): Promise<ServableCertificate | undefined> {
    const rows = await this.db
      .selectFrom('tls_certificates')
      .select(['id', 'certificate_pem', 'private_key_pem', 'dns_names', 'not_after'])
      .where('not_after', '>', nowRfc3339(now))
      .execute();
    let best: ServableCertificate | undefined;
    for (const row of rows) {
      const dnsNames = JSON.parse(row.dns_names) as string[];
      if (!dnsNames.some((san) => certificateNameCovers(san, name))) continue;
      const notAfter = new Date(row.not_after);
      if (best && best.notAfter >= notAfter) continue;
      best = {
        id: row.id,
        certificatePem: row.certificate_pem,
        privateKeyPem: row.private_key_pem,
        dnsNames,
        notAfter,
      };
    }
    return best;
  }
}
