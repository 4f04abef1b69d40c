/**
 * The edge's certificates: the local CA (local-ca.ts), on-demand SNI certificates for the
 * HTTPS/TLS ingress (certificate-store.ts), and the agent listener's certificate (here).
 */
import type { SecureContextOptions } from 'node:tls';
import type { Logger } from '../../core/logger.js';
import { findCertificateFile, loadCertificateFile } from './certificate-files.js';
import { normalizeCertificateName } from './certificate-names.js';
import type { LocalCa } from './local-ca.js';

export { LocalCa, LEAF_VALIDITY_DAYS } from './local-ca.js';
export type { IssuedCertificate, IssueOptions } from './local-ca.js';
export { CertificateStore, CertificateRefusedError } from './certificate-store.js';
export type { CertificateStoreOptions, ServedCertificate } from './certificate-store.js';
export { CERTS_DIR, findCertificateFile, loadCertificateFile } from './certificate-files.js';
export { wildcardSanFor, canonicalCertificateNames } from './certificate-names.js';

/** A certificate and key for a server's default context, with where it came from. */
export interface ServerCertificate {
  certPem: string;
  keyPem: string;
  notAfter: Date;
  source: 'local-ca' | 'file';
}

/** Names every agent-listener certificate carries, so local agents can dial any loopback form. */
export const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'] as const;

/** Wildcard listen addresses mean "every interface"; no client dials them, so no SAN for them. */
const UNSPECIFIED = new Set(['', '0.0.0.0', '::']);

/**
 * The agent listener's certificate. Agents check it against the host they dial (docs/protocol.md
 * §1), so it carries `localhost`, `127.0.0.1`, `::1` and `hosts` (e.g. the public agent host).
 * A real certificate in `certsDir` for one of `hosts` (`<host>.pem` + `.key`) wins.
 * @example
 * const cert = await agentListenerCertificate(ca, { hosts: ['edge.example.com'] });
 * tls.createServer({ cert: cert.certPem, key: cert.keyPem });
 */
export async function agentListenerCertificate(
  ca: LocalCa,
  options: { hosts?: readonly string[]; certsDir?: string; now?: Date } = {},
): Promise<ServerCertificate> {
  const hosts = (options.hosts ?? [])
    .map(normalizeCertificateName)
    .filter((h) => !UNSPECIFIED.has(h));
  if (options.certsDir !== undefined) {
    for (const host of hosts) {
      const file = await findCertificateFile(options.certsDir, host);
      if (file) return { ...(await loadCertificateFile(file, host)), source: 'file' };
    }
  }
  const issued = await ca.issue([...LOOPBACK_NAMES, ...hosts], { now: options.now });
  return {
    certPem: issued.certPem,
    keyPem: issued.keyPem,
    notAfter: issued.notAfter,
    source: 'local-ca',
  };
}

export interface CertificateRenewalOptions {
  /** Replace the certificate this long before it expires. Default 30 days. */
  renewBeforeMs?: number;
  /** Wait at least this long between attempts (after a failure or an already-due certificate). Default 1 h. */
  minIntervalMs?: number;
  secureContextOptions?: SecureContextOptions;
  logger?: Logger;
}

/** setTimeout cannot wait longer than about 24.8 days; longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Keeps a server's default certificate (the one used without SNI, e.g. by agents dialling an IP)
 * fresh for a long-running process: shortly before `current` expires, `obtain()` is called and
 * the result installed with `server.setSecureContext`. Timers do not keep the process alive.
 * @example
 * const renewal = renewServerCertificate(server, cert, () => agentListenerCertificate(ca));
 * server.on('close', () => renewal.stop());
 */
export function renewServerCertificate(
  server: { setSecureContext(options: SecureContextOptions): void },
  current: ServerCertificate,
  obtain: () => Promise<ServerCertificate>,
  options: CertificateRenewalOptions = {},
): { stop(): void } {
  const renewBeforeMs = options.renewBeforeMs ?? 30 * 24 * 60 * 60 * 1000;
  const minIntervalMs = options.minIntervalMs ?? 60 * 60 * 1000;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const schedule = (cert: ServerCertificate, delayFloor: number): void => {
    if (stopped) return;
    const due = cert.notAfter.getTime() - renewBeforeMs;
    const delay = Math.min(Math.max(due - Date.now(), delayFloor), MAX_TIMER_MS);
    timer = setTimeout(() => tick(cert), delay);
    timer.unref();
  };

  const tick = (cert: ServerCertificate): void => {
    if (stopped) return;
    if (Date.now() < cert.notAfter.getTime() - renewBeforeMs) return schedule(cert, 0);
    obtain().then(
      (next) => {
        if (stopped) return;
        server.setSecureContext({
          ...options.secureContextOptions,
          cert: next.certPem,
          key: next.keyPem,
        });
        options.logger?.info(
          { notAfter: next.notAfter, source: next.source },
          'server certificate renewed',
        );
        schedule(next, minIntervalMs);
      },
      (err: unknown) => {
        options.logger?.warn({ err }, 'server certificate renewal failed; will retry');
        schedule(cert, minIntervalMs);
      },
    );
  };

  schedule(current, 0);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
