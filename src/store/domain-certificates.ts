import type { Kysely } from 'kysely';
import type {
  CertificateManagementPolicy,
  CertificateManagementStatus,
} from './reserved-domains.js';
import type { Database } from './schema.js';

/** A reserved domain whose certificate Burrow orders (it has a certificate management policy). */
export interface ManagedDomain {
  id: string;
  domain: string;
  cnameTarget: string | null;
  acmeChallengeTarget: string | null;
  policy: CertificateManagementPolicy;
  status: CertificateManagementStatus | null;
  certificateId: string | null;
}

/**
 * The reserved-domain side of certificate management, for the ACME client: which domains want a
 * managed certificate, and where it records its progress and the certificate it obtained.
 * @example for (const d of await domainCerts.managed()) if (!d.certificateId) await order(d);
 */
export class DomainCertificateRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Every reserved domain with a certificate management policy. */
  async managed(): Promise<ManagedDomain[]> {
    const rows = await this.db
      .selectFrom('reserved_domains')
      .select([
        'id',
        'domain',
        'cname_target',
        'acme_challenge_cname_target',
        'certificate_management_policy',
        'certificate_management_status',
        'certificate_id',
      ])
      .where('certificate_management_policy', 'is not', null)
      .orderBy('id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      domain: r.domain,
      cnameTarget: r.cname_target,
      acmeChallengeTarget: r.acme_challenge_cname_target,
      policy: JSON.parse(r.certificate_management_policy!) as CertificateManagementPolicy,
      status:
        r.certificate_management_status === null
          ? null
          : (JSON.parse(r.certificate_management_status) as CertificateManagementStatus),
      certificateId: r.certificate_id,
    }));
  }

  /**
   * Record the latest provisioning state, and the certificate when one was issued, unless the
   * domain's policy was removed meanwhile (then the order's result is not wanted).
   */
  async record(
    id: string,
    status: CertificateManagementStatus,
    certificateId?: string,
  ): Promise<void> {
    await this.db
      .updateTable('reserved_domains')
      .set({
        certificate_management_status: JSON.stringify(status),
        ...(certificateId === undefined ? {} : { certificate_id: certificateId }),
      })
      .where('id', '=', id)
      .where('certificate_management_policy', 'is not', null)
      .execute();
  }
}
