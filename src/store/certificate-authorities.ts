import { X509Certificate } from 'node:crypto';
// @peculiar/x509's dependency injection (tsyringe) needs the Reflect metadata API loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { CODES, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns } from './described.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';
import { missingIds, refuseWhileReferenced } from './refs.js';
import type { CertificateAuthoritiesTable } from './schema.js';

/** A CA certificate that TLS edges' mutual_tls module trusts for client certificates. */
export interface CertificateAuthority {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  ca_pem: string;
  subject_common_name: string;
  not_before: string;
  not_after: string;
  key_usages: string[];
  extended_key_usages: string[];
}

export interface CertificateAuthorityCreate {
  ca_pem: string;
  description?: string | undefined;
  metadata?: string | undefined;
}

export type CertificateAuthorityUpdate = Pick<
  CertificateAuthorityCreate,
  'description' | 'metadata'
>;

type ParsedCa = Pick<
  CertificateAuthoritiesTable,
  'ca_pem' | 'subject_common_name' | 'not_before' | 'not_after'
> & { key_usages: string[]; extended_key_usages: string[] };

function invalidPem(message: string): ValidationError {
  return new ValidationError(CODES.invalidCaPem, 'ca_pem', message);
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

/** RFC 5280 KeyUsage bits by the snake_case names the API uses, in bit order. */
const KEY_USAGE_NAMES: [x509.KeyUsageFlags, string][] = [
  [x509.KeyUsageFlags.digitalSignature, 'digital_signature'],
  [x509.KeyUsageFlags.nonRepudiation, 'content_commitment'],
  [x509.KeyUsageFlags.keyEncipherment, 'key_encipherment'],
  [x509.KeyUsageFlags.dataEncipherment, 'data_encipherment'],
  [x509.KeyUsageFlags.keyAgreement, 'key_agreement'],
  [x509.KeyUsageFlags.keyCertSign, 'cert_sign'],
  [x509.KeyUsageFlags.cRLSign, 'crl_sign'],
  [x509.KeyUsageFlags.encipherOnly, 'encipher_only'],
  [x509.KeyUsageFlags.decipherOnly, 'decipher_only'],
];

/** Extended key usage OIDs by API name; others are reported as their dotted OID. */
const EXTENDED_KEY_USAGE_NAMES: Record<string, string> = {
  '2.5.29.37.0': 'any',
  '1.3.6.1.5.5.7.3.1': 'server_auth',
  '1.3.6.1.5.5.7.3.2': 'client_auth',
  '1.3.6.1.5.5.7.3.3': 'code_signing',
  '1.3.6.1.5.5.7.3.4': 'email_protection',
  '1.3.6.1.5.5.7.3.5': 'ipsec_end_system',
  '1.3.6.1.5.5.7.3.6': 'ipsec_tunnel',
  '1.3.6.1.5.5.7.3.7': 'ipsec_user',
  '1.3.6.1.5.5.7.3.8': 'time_stamping',
  '1.3.6.1.5.5.7.3.9': 'ocsp_signing',
};

/**
 * The subject CN as stored (the last, most specific one; '' when none) and the key usages by name
 * ([] when the extension is absent): Node's X509Certificate has no API for either. Throws when
 * the DER is not a certificate.
 */
function certificateFields(der: Uint8Array): {
  subjectCommonName: string;
  keyUsages: string[];
  extendedKeyUsages: string[];
} {
  const cert = new x509.X509Certificate(der);
  const keyUsage = cert.getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
  const extended = cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages ?? [];
  return {
    subjectCommonName: cert.subjectName.getField('CN').at(-1) ?? '',
    keyUsages: KEY_USAGE_NAMES.filter(([flag]) => keyUsage & flag).map(([, name]) => name),
    extendedKeyUsages: Array.from(extended, (usage) => {
      const oid = String(usage);
      return EXTENDED_KEY_USAGE_NAMES[oid] ?? oid;
    }),
  };
}

/**
 * Check that `pem` is exactly one CA certificate and read what the API shows of it.
 * @example parseCaPem(readFileSync('ca.pem', 'utf8')).subject_common_name // 'Test CA'
 */
export function parseCaPem(pem: string): ParsedCa {
  const blocks = [...pem.matchAll(PEM_BLOCK)];
  if (blocks.length === 0) {
    throw invalidPem(
      'must be a certificate in PEM form, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----',
    );
  }
  const other = blocks.find((b) => b[1] !== 'CERTIFICATE');
  if (other) {
    throw invalidPem(
      other[1]!.includes('PRIVATE KEY')
        ? 'must not contain a private key: mutual TLS needs only the CA certificate; keep its key secret'
        : `contains a ${other[1]} block; send only the CA certificate`,
    );
  }
  if (blocks.length > 1) {
    throw invalidPem(
      `contains ${blocks.length} certificates; send exactly one CA certificate (create one certificate authority per CA)`,
    );
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(blocks[0]![0]);
  } catch {
    throw invalidPem('the CERTIFICATE block is not a valid X.509 certificate');
  }
  if (!cert.ca) {
    throw invalidPem(
      'is not a certificate authority: its basicConstraints extension lacks CA:TRUE. Upload the CA certificate that issued your client certificates, not a client certificate',
    );
  }
  let fields: ReturnType<typeof certificateFields>;
  try {
    fields = certificateFields(cert.raw);
  } catch {
    throw invalidPem('the certificate could not be read: its DER encoding is malformed');
  }
  const notBefore = new Date(cert.validFrom);
  const notAfter = new Date(cert.validTo);
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime())) {
    throw invalidPem('the certificate has an unreadable validity period');
  }
  return {
    ca_pem: cert.toString(),
    subject_common_name: fields.subjectCommonName,
    not_before: nowRfc3339(notBefore),
    not_after: nowRfc3339(notAfter),
    key_usages: fields.keyUsages,
    extended_key_usages: fields.extendedKeyUsages,
  };
}

function toCa(row: CertificateAuthoritiesTable): CertificateAuthority {
  return {
    ...row,
    key_usages: JSON.parse(row.key_usages) as string[],
    extended_key_usages: JSON.parse(row.extended_key_usages) as string[],
  };
}

/**
 * Certificate authorities for mutual TLS. Only the certificate is stored, never a key; one that a
 * TLS edge's mutual_tls module uses cannot be deleted.
 * @example const ca = await cas.create({ ca_pem: pem, description: 'client CA' });
 */
export class CertificateAuthorityRepository extends ResourceRepository<
  'certificate_authorities',
  CertificateAuthority
> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'certificate_authorities', toCa);
  }

  async create(input: CertificateAuthorityCreate): Promise<CertificateAuthority> {
    const parsed = parseCaPem(input.ca_pem);
    const row: CertificateAuthoritiesTable = {
      id: newId(ID_PREFIX.certificateAuthority),
      ...describedColumns(input),
      ...parsed,
      key_usages: JSON.stringify(parsed.key_usages),
      extended_key_usages: JSON.stringify(parsed.extended_key_usages),
    };
    await this.db.insertInto('certificate_authorities').values(row).execute();
    return toCa(row);
  }

  async update(
    id: string,
    patch: CertificateAuthorityUpdate,
  ): Promise<CertificateAuthority | undefined> {
    await this.writeColumns(id, describedChanges(patch));
    return this.get(id);
  }

  /** Delete; false when absent. Refused while a TLS edge's mutual_tls uses it. */
  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, (trx) =>
      refuseWhileReferenced(
        trx,
        id,
        CODES.caInUse,
        (by) =>
          `The certificate authority ${id} is still used by ${by}. Remove it from that edge's mutual_tls first.`,
      ),
    );
  }

  /** Ids among `ids` that name no certificate authority, in the order given. */
  async missing(ids: readonly string[]): Promise<string[]> {
    return missingIds(this.db, 'certificate_authorities', ids);
  }

  /**
   * The PEM certificates of `ids`, for the edge to build its client-certificate trust store.
   * @example tls.createSecureContext({ ca: await cas.pemsFor(edge.mutual_tls.certificate_authority_ids) })
   */
  async pemsFor(ids: readonly string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('certificate_authorities')
      .select('ca_pem')
      .where('id', 'in', [...new Set(ids)])
      .orderBy('id')
      .execute();
    return rows.map((r) => r.ca_pem);
  }
}
