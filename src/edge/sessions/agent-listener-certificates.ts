import { createSecureContext, type SecureContext } from 'node:tls';
import type { Logger } from '../../core/logger.js';
import {
  sniCallbackOf,
  type SniCallback,
  type StoredCertificate,
} from '../certificates/certificate-store.js';

/** How long a lookup of the agent hostname's stored certificate is trusted. */
const RECHECK_MS = 5000;

/**
 * The agent listener's certificate for the name agents dial (`--agent-hostname`): a stored one
 * (ACME-issued or uploaded) when the store has one covering the name, so agents need no `--ca`;
 * otherwise the listener's default (local CA) certificate. Looked up per handshake through
 * SNICallback with a short cache, so a new certificate is used by the next handshake while
 * sessions already connected keep theirs: switching drops nobody.
 * @example
 * const pick = new AgentCertificatePicker('connect.example.com', storedCertificates(repos));
 * tls.createServer({ SNICallback: pick.sniCallback, cert, key });
 */
export class AgentCertificatePicker {
  private cached: { at: number; id: string | undefined; context: SecureContext | undefined } = {
    at: -Infinity,
    id: undefined,
    context: undefined,
  };

  constructor(
    private readonly hostname: string | undefined,
    private readonly stored: ((name: string) => Promise<StoredCertificate | undefined>) | undefined,
    private readonly logger?: Logger,
  ) {}

  /** Forget the cached lookup (a certificate was just issued). */
  refresh(): void {
    this.cached.at = -Infinity;
  }

  readonly sniCallback: SniCallback = sniCallbackOf(
    (servername) => this.contextFor(servername),
    (err) => {
      // The default certificate still lets agents that trust the local CA in.
      this.logger?.warn({ err }, 'looking up the agent hostname certificate failed');
      return undefined;
    },
  );

  private async contextFor(servername: string): Promise<SecureContext | undefined> {
    if (!this.hostname || !this.stored || servername.toLowerCase() !== this.hostname) {
      return undefined;
    }
    if (Date.now() - this.cached.at < RECHECK_MS) return this.cached.context;
    const found = await this.stored(this.hostname);
    if (found?.id !== this.cached.id) {
      this.cached.context =
        found && createSecureContext({ cert: found.certificatePem, key: found.privateKeyPem });
      this.cached.id = found?.id;
      if (found)
        this.logger?.info({ certificate: found.id }, 'agent listener serves a stored certificate');
    }
    this.cached.at = Date.now();
    return this.cached.context;
  }
}
