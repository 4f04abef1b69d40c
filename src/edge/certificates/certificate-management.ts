import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ServerConfig } from '../../core/config.js';
import { formatHostPort } from '../../core/host-port.js';
import type { Logger } from '../../core/logger.js';
import type { Repositories } from '../../store/index.js';
import { AcmeManager } from './acme-manager.js';
import type { AcmeChallengeLookup } from './acme-http-challenge.js';
import type { StoredCertificate } from './certificate-store.js';
import { startDnsServer, type DnsServer } from './dns-server.js';

/** Running certificate management: the ACME client and Burrow's DNS server, each when enabled. */
export interface CertificateManagement {
  /** The DNS server's bound `host:port`, when `--dns-listen` is set. */
  dnsAddress: string | undefined;
  close(): Promise<void>;
}

/**
 * Where the edge's CertificateStore finds stored certificates (uploaded or issued).
 * @example new CertificateStore({ ca, nameAllowed, stored: storedCertificates(repos) })
 */
export function storedCertificates(
  repos: Pick<Repositories, 'tlsCertificates'>,
): (name: string) => Promise<StoredCertificate | undefined> {
  return (name) => repos.tlsCertificates.servableFor(name);
}

/**
 * The HTTP ingress's answers to HTTP-01 challenges, from the store (any process may have ordered).
 * @example startIngress({ ..., acmeChallenge: acmeHttpChallenges(repos) })
 */
export function acmeHttpChallenges(repos: Pick<Repositories, 'acme'>): AcmeChallengeLookup {
  return async (token) => (await repos.acme.challengeValues('http-01', token))[0];
}

/**
 * Start the DNS server (`--dns-listen`) and the ACME client (`--acme-directory`) as configured.
 * `onIssued` runs after each new certificate is stored, so serving code can drop cached lookups.
 * @example const management = await startCertificateManagement({ config, repos, logger, onIssued: () => certificates.clear() });
 */
export async function startCertificateManagement(options: {
  config: ServerConfig;
  repos: Repositories;
  logger: Logger;
  onIssued: () => void;
}): Promise<CertificateManagement> {
  const { config, repos } = options;
  const logger = options.logger.child({ component: 'certificates' });
  let dns: DnsServer | undefined;
  if (config.dnsListen) {
    dns = await startDnsServer({
      listen: config.dnsListen,
      zone: config.baseDomain,
      publicIps: config.publicIp,
      records: { txt: (name) => repos.acme.challengeValues('dns-01', name) },
      logger, // logs 'DNS listening' with its address, port and zone
    });
  }
  let acme: AcmeManager | undefined;
  if (config.acmeDirectory) {
    acme = new AcmeManager({
      settings: {
        directoryUrl: config.acmeDirectory,
        email: config.acmeEmail,
        caPem: config.acmeCaCert,
        eab: config.acmeEabKid
          ? { kid: config.acmeEabKid, hmacKey: config.acmeEabHmacKey }
          : undefined,
        renewAfter: config.acmeRenewAfter,
        retryMinMs: config.acmeRetryMin * 1000,
      },
      repos,
      baseDomain: config.baseDomain,
      orderBaseWildcard: dns !== undefined,
      hostnames: config.agentHostname ? [config.agentHostname] : [],
      holder: `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`,
      logger,
      onIssued: options.onIssued,
    });
    acme.start();
    logger.info({ directory: config.acmeDirectory }, 'ACME certificate management on');
  }
  return {
    dnsAddress: dns && formatHostPort(dns.address, dns.port),
    async close() {
      await acme?.close();
      await dns?.close();
    },
  };
}
