import { generateKeyPairSync } from 'node:crypto';
import { Agent as HttpsAgent } from 'node:https';
import { rootCertificates } from 'node:tls';
import * as acme from 'acme-client';
import { isOneLabelUnder } from '../../core/hostname.js';
import type { Logger } from '../../core/logger.js';
import type { Repositories } from '../../store/index.js';
import { nowRfc3339 } from '../../store/paging.js';
import {
  PROVISIONING_MESSAGE,
  type CertificateManagementStatus,
} from '../../store/reserved-domains.js';
import {
  baseSubject,
  describeFailure,
  domainSubject,
  hostSubject,
  type AcmeSubject,
} from './acme-subjects.js';

/** How Burrow talks to its ACME CA (`--acme-*` options). */
export interface AcmeSettings {
  directoryUrl: string;
  email: string;
  /** PEM trusted for the directory's HTTPS, besides the system roots (private and test CAs). */
  caPem: string;
  eab?: { kid: string; hmacKey: string } | undefined;
  /** Fraction of the lifetime after which a certificate is renewed. */
  renewAfter: number;
  /** First retry delay after a failure; doubles per failure up to an hour. */
  retryMinMs: number;
}

export interface AcmeManagerOptions {
  settings: AcmeSettings;
  repos: Pick<Repositories, 'settings' | 'tlsCertificates' | 'domainCertificates' | 'acme'>;
  baseDomain: string;
  /** Order `*.<baseDomain>` too (only when Burrow's DNS server answers for the base domain). */
  orderBaseWildcard: boolean;
  /** Names the server answers on itself (`--agent-hostname`), ordered unless the base wildcard covers them. */
  hostnames?: readonly string[];
  /** This process, as lease holder. */
  holder: string;
  logger: Logger;
  /** A certificate was stored: serving code drops cached lookups. */
  onIssued: () => void;
  /** How often the subjects are looked over. Default 5 s. */
  intervalMs?: number;
  now?: () => number;
}

const LEASE_MS = 10 * 60_000;
const CHALLENGE_TTL_MS = 15 * 60_000;
const MAX_RETRY_MS = 60 * 60_000;

/**
 * Orders, stores and renews certificates with an ACME CA (RFC 8555, through acme-client): HTTP-01
 * for plain names (answered by the HTTP ingress from the store), DNS-01 for wildcards (answered by
 * Burrow's DNS server from the store). Progress and failures go to each reserved domain's
 * `certificate_management_status`; failures retry with a doubling delay. Orders hold a lease in
 * the store, so one process orders a subject at a time whatever the number of processes.
 * @example
 * const manager = new AcmeManager({ settings, repos, baseDomain, orderBaseWildcard: false, holder, logger, onIssued });
 * manager.start();
 */
export class AcmeManager {
  private readonly now: () => number;
  private readonly failures = new Map<string, number>();
  /** Status of subjects that have no reserved domain to record it in (base, hostnames). */
  private readonly ownStatus = new Map<string, CertificateManagementStatus>();
  private client: acme.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: AcmeManagerOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Look over the subjects now and then every interval, until close(). */
  start(): void {
    const loop = (): void => {
      if (this.stopped) return;
      this.running = this.reconcile()
        .catch((err: unknown) => this.options.logger.error({ err }, 'ACME pass failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(loop, this.options.intervalMs ?? 5000);
        });
    };
    loop();
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass: order every subject that has no certificate, needs renewal, or may retry now. */
  async reconcile(): Promise<void> {
    const { repos } = this.options;
    await repos.acme.purgeExpiredChallenges();
    const subjects = (await repos.domainCertificates.managed()).map(domainSubject);
    const own = async (key: string) => ({
      id: (await repos.tlsCertificates.latestManaged(key))?.id ?? null,
      status: this.ownStatus.get(key) ?? null,
    });
    const { baseDomain, orderBaseWildcard } = this.options;
    if (orderBaseWildcard) {
      const { id, status } = await own('base');
      subjects.push(baseSubject(baseDomain, id, status));
    }
    for (const name of this.options.hostnames ?? []) {
      // The base wildcard covers it already.
      if (orderBaseWildcard && isOneLabelUnder(name, baseDomain)) continue;
      const { id, status } = await own(`host:${name}`);
      subjects.push(hostSubject(name, id, status));
    }
    for (const subject of subjects) {
      if (this.stopped) return;
      if (await this.isDue(subject)) await this.orderWithLease(subject);
    }
  }

  private async isDue(subject: AcmeSubject): Promise<boolean> {
    const retriesAt = subject.status?.provisioning_job?.retries_at;
    if (retriesAt && Date.parse(retriesAt) > this.now()) return false;
    if (!subject.certificateId) return true;
    const current = await this.options.repos.tlsCertificates.get(subject.certificateId);
    return !current || this.now() >= this.renewsAt(current.not_before, current.not_after);
  }

  private renewsAt(notBefore: string, notAfter: string): number {
    const from = Date.parse(notBefore);
    return from + (Date.parse(notAfter) - from) * this.options.settings.renewAfter;
  }

  private async orderWithLease(subject: AcmeSubject): Promise<void> {
    const { acme: state } = this.options.repos;
    if (!(await state.lease(subject.key, this.options.holder, LEASE_MS))) return;
    try {
      await this.order(subject);
    } finally {
      await state.release(subject.key, this.options.holder);
    }
  }

  private async order(subject: AcmeSubject): Promise<void> {
    const { repos, logger } = this.options;
    const startedAt = nowRfc3339(new Date(this.now()));
    const previousRenewal = subject.status?.renews_at ?? null;
    await this.record(subject, {
      renews_at: previousRenewal,
      provisioning_job: {
        error_code: null,
        msg: PROVISIONING_MESSAGE,
        started_at: startedAt,
        retries_at: null,
      },
    });
    const published: string[] = [];
    let validating = false;
    try {
      const key =
        subject.keyType === 'rsa'
          ? await acme.crypto.createPrivateRsaKey(2048)
          : await acme.crypto.createPrivateEcdsaKey('P-256');
      const [, csr] = await acme.crypto.createCsr(
        { commonName: subject.names[0]!, altNames: subject.names },
        key,
      );
      logger.info({ names: subject.names, challenge: subject.challenge }, 'ordering certificate');
      const chain = await (
        await this.acmeClient()
      ).auto({
        csr,
        ...(this.options.settings.email ? { email: this.options.settings.email } : {}),
        termsOfServiceAgreed: true,
        challengePriority: [subject.challenge],
        // The CA checks from where it stands; our own look from here proves nothing.
        skipChallengeVerification: true,
        challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
          validating = true;
          const name = challenge.type === 'dns-01' ? subject.txtName! : challenge.token;
          const kind = challenge.type === 'dns-01' ? 'dns-01' : 'http-01';
          published.push(
            await repos.acme.putChallenge(kind, name, keyAuthorization, CHALLENGE_TTL_MS),
          );
        },
        challengeRemoveFn: async () => {
          // Answers are removed all together once the order ends (below).
        },
      });
      validating = false;
      const stored = await repos.tlsCertificates.create(
        {
          certificate_pem: chain,
          private_key_pem: key.toString(),
          description: `ACME certificate for ${subject.names.join(', ')}`,
        },
        subject.key,
      );
      await this.record(
        subject,
        {
          renews_at: nowRfc3339(new Date(this.renewsAt(stored.not_before, stored.not_after))),
          provisioning_job: null,
        },
        stored.id,
      );
      await repos.tlsCertificates.deleteManagedExcept(subject.key, stored.id);
      this.failures.delete(subject.key);
      logger.info(
        { names: subject.names, certificate: stored.id, not_after: stored.not_after },
        'certificate issued',
      );
      this.options.onIssued();
    } catch (err) {
      const failures = (this.failures.get(subject.key) ?? 0) + 1;
      this.failures.set(subject.key, failures);
      const delay = Math.min(this.options.settings.retryMinMs * 2 ** (failures - 1), MAX_RETRY_MS);
      const failure = describeFailure(subject, err, validating);
      logger.warn({ names: subject.names, ...failure, failures }, 'certificate order failed');
      await this.record(subject, {
        renews_at: previousRenewal,
        provisioning_job: {
          ...failure,
          started_at: startedAt,
          retries_at: nowRfc3339(new Date(this.now() + delay)),
        },
      });
    } finally {
      for (const id of published) await repos.acme.removeChallenge(id);
    }
  }

  private async record(
    subject: AcmeSubject,
    status: CertificateManagementStatus,
    certificateId?: string,
  ): Promise<void> {
    subject.status = status;
    if (subject.key === 'base' || subject.key.startsWith('host:')) {
      this.ownStatus.set(subject.key, status);
      return;
    }
    await this.options.repos.domainCertificates.record(subject.key, status, certificateId);
  }

  /** The ACME client, with its account key kept in the store so every process shares one account. */
  private async acmeClient(): Promise<acme.Client> {
    if (this.client) return this.client;
    const { settings } = this.options;
    // getOrCreate makes concurrent processes agree on one key.
    const keyPem = await this.options.repos.settings.getOrCreate('acme_account_key', () =>
      generateKeyPairSync('ec', { namedCurve: 'P-256' })
        .privateKey.export({ type: 'pkcs8', format: 'pem' })
        .toString(),
    );
    if (settings.caPem) {
      // acme-client talks through its own axios instance; trust the private CA there only.
      acme.axios.defaults.httpsAgent = new HttpsAgent({
        ca: [...rootCertificates, settings.caPem],
      });
    }
    this.client = new acme.Client({
      directoryUrl: settings.directoryUrl,
      accountKey: keyPem,
      backoffAttempts: 10,
      backoffMin: 250,
      backoffMax: 10_000,
      ...(settings.eab
        ? { externalAccountBinding: { kid: settings.eab.kid, hmacKey: settings.eab.hmacKey } }
        : {}),
    });
    return this.client;
  }
}
