import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { domainCovers, isAtOrUnder } from '../core/hostname.js';
import { ID_PREFIX, newId, randomDnsLabel } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, describedOf } from './described.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';
import { refuseWhileEdgeUses } from './refs.js';
import type { ReservedDomainsTable } from './schema.js';

import {
  checkDomain,
  checkPolicy,
  initialStatus,
  normalizeDomain,
  POLICY_FIELD,
  type CertificateManagementPolicy,
  type CertificateManagementStatus,
  type ReservedDomain,
  type ReservedDomainCreate,
  type ReservedDomainUpdate,
} from './reserved-domain-rules.js';

export * from './reserved-domain-rules.js';

function parseJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}

function toReservedDomain(row: ReservedDomainsTable): ReservedDomain {
  return {
    id: row.id,
    ...describedOf(row),
    domain: row.domain,
    region: row.region,
    cname_target: row.cname_target,
    acme_challenge_cname_target: row.acme_challenge_cname_target,
    certificate_management_policy: parseJson<CertificateManagementPolicy>(
      row.certificate_management_policy,
    ),
    certificate_management_status: parseJson<CertificateManagementStatus>(
      row.certificate_management_status,
    ),
    certificate_id: row.certificate_id,
  };
}

/**
 * Reserved domains. A custom domain (not under the base domain) gets a CNAME target, a wildcard one
 * also an ACME challenge target, and a certificate policy; names under the base domain get none.
 * @example await domains.create({ domain: '*.sitea.example.com' })
 */
export class ReservedDomainRepository extends ResourceRepository<
  'reserved_domains',
  ReservedDomain
> {
  constructor(readonly deps: RepoDeps) {
    super(deps.db, 'reserved_domains', toReservedDomain);
  }

  private get baseDomain(): string {
    return this.deps.settings.baseDomain.toLowerCase();
  }

  /** True when `domain` belongs to the server (at or under its base domain). */
  isServerDomain(domain: string): boolean {
    return isAtOrUnder(domain.startsWith('*.') ? domain.slice(2) : domain, this.baseDomain);
  }

  async create(input: ReservedDomainCreate): Promise<ReservedDomain> {
    const domain = normalizeDomain(input.domain);
    checkDomain(domain, this.baseDomain);
    const serverOwned = this.isServerDomain(domain);
    if (serverOwned && input.certificate_management_policy !== undefined) {
      throw this.policyOnServerDomain(domain);
    }
    const uploaded = await this.checkCertificateChoice(input);
    const createdAt = nowRfc3339();
    const policy =
      serverOwned || uploaded ? null : checkPolicy(input.certificate_management_policy ?? {});
    const wildcard = domain.startsWith('*.');
    const row: ReservedDomainsTable = {
      id: newId(ID_PREFIX.reservedDomain),
      ...describedColumns(input, createdAt),
      domain,
      // Region is deprecated in the API Burrow follows: always returned empty.
      region: '',
      cname_target: serverOwned ? null : `${randomDnsLabel(13)}.cname.${this.baseDomain}`,
      acme_challenge_cname_target:
        serverOwned || !wildcard ? null : `${randomDnsLabel(8)}.acme-challenge.${this.baseDomain}`,
      certificate_management_policy: policy && JSON.stringify(policy),
      certificate_management_status: policy && JSON.stringify(this.initialStatus(createdAt)),
      certificate_id: uploaded ?? null,
    };
    try {
      await this.db.insertInto('reserved_domains').values(row).execute();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const existing = await this.findByDomain(domain);
      throw new ConflictError(
        CODES.domainAlreadyReserved,
        `The domain ${domain} is already reserved${existing ? ` (${existing.id})` : ''}. Use that reservation, or delete it first.`,
      );
    }
    return toReservedDomain(row);
  }

  /**
   * Change description, metadata and the certificate policy. A policy that differs from the stored
   * one (or replaces a detached one) restarts the provisioning status.
   */
  async update(id: string, patch: ReservedDomainUpdate): Promise<ReservedDomain | undefined> {
    const current = await this.get(id);
    if (!current) return undefined;
    const set: Partial<ReservedDomainsTable> = describedChanges(patch);
    const uploaded = await this.checkCertificateChoice(patch);
    if (uploaded) {
      Object.assign(set, {
        certificate_id: uploaded,
        certificate_management_policy: null,
        certificate_management_status: null,
      });
    }
    if (patch.certificate_management_policy !== undefined) {
      if (this.isServerDomain(current.domain)) throw this.policyOnServerDomain(current.domain);
      const policy = checkPolicy(patch.certificate_management_policy);
      const old = current.certificate_management_policy;
      if (
        !old ||
        !current.certificate_management_status ||
        old.authority !== policy.authority ||
        old.private_key_type !== policy.private_key_type
      ) {
        set.certificate_management_policy = JSON.stringify(policy);
        set.certificate_management_status = JSON.stringify(this.initialStatus(nowRfc3339()));
        // A new policy orders afresh; an uploaded certificate gives way to it.
        set.certificate_id = null;
      }
    }
    return (await this.writeColumns(id, set)) ? this.get(id) : current;
  }

  /** Detach the certificate policy (and so its status); false when the domain does not exist. */
  async deleteCertificateManagementPolicy(id: string): Promise<boolean> {
    const res = await this.db
      .updateTable('reserved_domains')
      .set({
        certificate_management_policy: null,
        certificate_management_status: null,
        certificate_id: null,
      })
      .where('id', '=', id)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /**
   * Detach the certificate the domain serves (the local CA's serves until another is attached or
   * issued); idempotent, false when the domain does not exist.
   */
  async detachCertificate(id: string): Promise<boolean> {
    const res = await this.db
      .updateTable('reserved_domains')
      .set({ certificate_id: null })
      .where('id', '=', id)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  private initialStatus(startedAt: string): CertificateManagementStatus {
    return initialStatus(startedAt, this.deps.settings.acmeEnabled ?? false);
  }

  /** The uploaded certificate a create or update names, checked; 434 when a policy comes too. */
  private async checkCertificateChoice(input: ReservedDomainUpdate): Promise<string | undefined> {
    const id = input.certificate_id;
    if (id === undefined) return undefined;
    if (input.certificate_management_policy !== undefined) {
      throw new ValidationError(
        CODES.certificateAndPolicy,
        'certificate_id',
        'give either certificate_id (an uploaded certificate) or certificate_management_policy (a managed one), not both',
      );
    }
    const found = await this.db
      .selectFrom('tls_certificates')
      .select('id')
      .where('id', '=', id)
      .executeTakeFirst();
    if (!found) {
      throw new ValidationError(
        CODES.certificateNotFound,
        'certificate_id',
        `no TLS certificate has the id ${quote(id)}; upload one with POST /tls_certificates`,
      );
    }
    return id;
  }

  /** Delete; false when absent. Refused (409) while an edge uses the domain as a hostport. */
  async delete(id: string): Promise<boolean> {
    const use = (edge: { edge_id: string; hostport: string }) =>
      `is the hostport ${edge.hostport} of the edge ${edge.edge_id}. Remove it from that edge's hostports, or delete the edge, then delete the domain.`;
    return this.deleteCheckedRow(id, (trx, row) =>
      refuseWhileEdgeUses(
        trx,
        id,
        CODES.domainInUse,
        `The reserved domain ${row.domain} (${id})`,
        use,
      ),
    );
  }

  /** The reservation of exactly `name` (case-insensitive), wildcard or not. */
  async findByDomain(name: string): Promise<ReservedDomain | undefined> {
    const row = await this.db
      .selectFrom('reserved_domains')
      .selectAll()
      .where('domain', '=', normalizeDomain(name))
      .executeTakeFirst();
    return row && toReservedDomain(row);
  }

  /**
   * The reservation that covers `name`: its exact reservation, else the longest reserved wildcard
   * it falls under (at any depth).
   * @example await domains.findCovering('dev1.sitea.example.com') // the `*.sitea.example.com` row
   */
  async findCovering(name: string): Promise<ReservedDomain | undefined> {
    const host = normalizeDomain(name);
    const exact = await this.findByDomain(host);
    if (exact) return exact;
    const labels = host.split('.');
    // Every wildcard that could cover the name, so the lookup uses the unique index, not a scan.
    const candidates: string[] = [];
    for (let i = 1; i <= labels.length - 2; i++) candidates.push(`*.${labels.slice(i).join('.')}`);
    if (candidates.length === 0) return undefined;
    const rows = await this.db
      .selectFrom('reserved_domains')
      .selectAll()
      .where('domain', 'in', candidates)
      .execute();
    const best = rows
      .filter((r) => domainCovers(r.domain, host))
      .sort((a, b) => b.domain.length - a.domain.length)[0];
    return best && toReservedDomain(best);
  }

  private policyOnServerDomain(domain: string): ValidationError {
    return new ValidationError(
      CODES.policyOnServerDomain,
      POLICY_FIELD,
      `must be left out for ${domain}: names under the server's base domain ${this.baseDomain} use the server's own certificate`,
    );
  }
}
