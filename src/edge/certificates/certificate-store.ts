import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';
import { LRUCache } from 'lru-cache';
import { BurrowError, CODES, NO_HTTP_STATUS } from '../../core/errors.js';
import { certificateNameCovers } from '../../core/hostname.js';
import type { Logger } from '../../core/logger.js';
import {
  canonicalCertificateNames,
  certificateNameProblem,
  normalizeCertificateName,
} from './certificate-names.js';
import {
  findCertificateFile,
  loadCertificateFile,
  type CertificateFile,
} from './certificate-files.js';
import type { LocalCa } from './local-ca.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Refused because the edge does not serve the name (or it is not a valid name at all). */
export class CertificateRefusedError extends BurrowError {
  declare readonly code: typeof CODES.certificateRefused;
  constructor(
    readonly servername: string,
    reason: string,
  ) {
    super(
      CODES.certificateRefused,
      NO_HTTP_STATUS,
      `no certificate for "${servername}": ${reason}`,
    );
  }
}

export interface CertificateStoreOptions {
  ca: LocalCa;
  /**
   * Whether the edge serves `name` (normalized), asked on every handshake so a released domain
   * stops getting certificates at once. Keep it cheap (in memory). Nothing is issued for a name it
   * refuses, so clients cannot make the edge mint certificates for arbitrary names.
   */
  nameAllowed: (name: string) => boolean | Promise<boolean>;
  /**
   * The SANs to issue for an allowed `name`; must cover it. Default `[name]`. Return a wildcard
   * (see `wildcardSanFor`) to have one certificate serve all names one label below a domain.
   */
  sanFor?: (name: string) => readonly string[] | Promise<readonly string[]>;
  /**
   * Certificates kept in the store (uploaded, or issued by ACME) that cover `name`; preferred over
   * everything else. Asked again after `recheckMs`, or at once after clear().
   */
  stored?: (name: string) => Promise<StoredCertificate | undefined>;
  /** Folder of real certificates (`<name>.pem` + `<name>.key`), preferred over the local CA. */
  certsDir?: string;
  /** Certificates kept in memory; least recently used first out. Default 10,000. */
  maxEntries?: number;
  /** Renew a local-CA certificate this long before it expires. Default 30 days. */
  renewBeforeMs?: number;
  /** How long a name's SAN list and real-file lookup are trusted before being redone. Default 60 s. */
  recheckMs?: number;
  /** Extra TLS settings (ciphers, minVersion, ...) for every context. */
  secureContextOptions?: SecureContextOptions;
  /** The clock; tests move it. */
  now?: () => number;
  logger?: Logger;
}

/** A certificate from the store, as `stored` finds it. */
export interface StoredCertificate {
  id: string;
  certificatePem: string;
  privateKeyPem: string;
  notAfter: Date;
}

/** What is served for a name. */
export interface ServedCertificate {
  context: SecureContext;
  /** The chain served, PEM (leaf first). */
  certPem: string;
  /** Its private key, PEM: for contexts with other TLS settings (TLS edges' min_version, mutual TLS). */
  keyPem: string;
  source: 'local-ca' | 'file' | 'stored';
  /** The SANs issued (local CA), the file's path (file) or the certificate's id (stored). */
  names: string[];
  notAfter: Date;
  /** From when on a renewal is started (local CA); never for files, which change on disk. */
  renewAt: number;
}

type Resolution =
  | { key: string; checkedAt: number; kind: 'local-ca'; sans: string[] }
  | { key: string; checkedAt: number; kind: 'file'; file: CertificateFile }
  | { key: string; checkedAt: number; kind: 'stored'; stored: StoredCertificate };

/** Node's `SNICallback`. */
export type SniCallback = (
  servername: string,
  callback: (err: Error | null, context?: SecureContext) => void,
) => void;

/**
 * An `SNICallback` from an async lookup of the context for a name. `onError` says what a failed
 * lookup answers: an error fails the handshake, undefined goes on with the server's default
 * certificate.
 * @example tls.createServer({ SNICallback: sniCallbackOf((name) => contextFor(name), (err) => err as Error) })
 */
export function sniCallbackOf(
  lookup: (servername: string) => Promise<SecureContext | undefined>,
  onError: (err: unknown, servername: string) => Error | undefined,
): SniCallback {
  return (servername, callback) => {
    lookup(servername).then(
      (context) => callback(null, context),
      (err: unknown) => {
        const failed = onError(err, servername);
        if (failed) callback(failed);
        else callback(null, undefined);
      },
    );
  };
}

/**
 * Certificates for the HTTPS/TLS ingress, made on demand per SNI name: a real certificate from
 * `certsDir` when there is one, otherwise one issued by the local CA. Cached (LRU), one issuance
 * for concurrent requests of the same certificate, renewed in the background before expiry.
 * @example
 * const store = new CertificateStore({ ca, nameAllowed: (n) => n.endsWith('.burrow.localhost') });
 * tls.createServer({ SNICallback: store.sniCallback }, onConnection);
 */
export class CertificateStore {
  private readonly entries: LRUCache<string, ServedCertificate>;
  private readonly resolutions: LRUCache<string, Resolution>;
  private readonly pending = new Map<string, Promise<ServedCertificate>>();
  private readonly now: () => number;
  private readonly renewBeforeMs: number;
  private readonly recheckMs: number;

  constructor(private readonly options: CertificateStoreOptions) {
    const maxEntries = options.maxEntries ?? 10_000;
    this.entries = new LRUCache({ max: maxEntries });
    this.resolutions = new LRUCache({ max: maxEntries });
    this.now = options.now ?? Date.now;
    this.renewBeforeMs = options.renewBeforeMs ?? 30 * DAY_MS;
    this.recheckMs = options.recheckMs ?? 60_000;
  }

  /** Certificates currently cached. */
  get size(): number {
    return this.entries.size;
  }

  /** Forget every cached certificate and lookup (e.g. after replacing files in `certsDir`). */
  clear(): void {
    this.entries.clear();
    this.resolutions.clear();
  }

  /**
   * For `tls.createServer({ SNICallback })`: answers with the context for `servername`, or an
   * error (the handshake then fails) when the name is refused or issuance failed.
   * @example tls.createServer({ SNICallback: store.sniCallback })
   */
  readonly sniCallback: SniCallback = sniCallbackOf(
    (servername) => this.contextFor(servername),
    (err, servername) => {
      if (!(err instanceof CertificateRefusedError)) {
        this.options.logger?.warn({ err, servername }, 'no certificate for TLS handshake');
      }
      return err instanceof Error ? err : new Error(String(err));
    },
  );

  /**
   * The TLS context for `servername`.
   * @example const ctx = await store.contextFor('app.burrow.localhost');
   */
  async contextFor(servername: string): Promise<SecureContext> {
    return (await this.certificateFor(servername)).context;
  }

  /**
   * The certificate served for `servername`, issuing or loading it when needed. Rejects with
   * CertificateRefusedError for invalid or unserved names.
   * @example const { certPem, notAfter } = await store.certificateFor('app.burrow.localhost');
   */
  async certificateFor(servername: string): Promise<ServedCertificate> {
    const name = normalizeCertificateName(servername);
    const problem = certificateNameProblem(name);
    if (problem) throw new CertificateRefusedError(servername, problem);
    if (name.startsWith('*.')) {
      throw new CertificateRefusedError(servername, 'a client cannot ask for a wildcard name');
    }
    if (!(await this.options.nameAllowed(name))) {
      throw new CertificateRefusedError(servername, 'this edge does not serve that name');
    }
    const resolution = await this.resolve(name);
    const cached = this.entries.get(resolution.key);
    const now = this.now();
    if (cached && now < cached.notAfter.getTime()) {
      if (now >= cached.renewAt) this.renewInBackground(resolution, name);
      return cached;
    }
    return this.obtain(resolution, name);
  }

  /** Which certificate serves `name`: a real file, or the local CA with `sanFor`'s names. */
  private async resolve(name: string): Promise<Resolution> {
    const now = this.now();
    const cached = this.resolutions.get(name);
    if (cached && now - cached.checkedAt < this.recheckMs) return cached;
    let resolution: Resolution | undefined;
    const stored = await this.options.stored?.(name);
    if (stored) resolution = { key: `stored:${stored.id}`, checkedAt: now, kind: 'stored', stored };
    if (!resolution && this.options.certsDir !== undefined) {
      const file = await findCertificateFile(this.options.certsDir, name);
      if (file) {
        const key = `file:${file.certPath}:${file.version}`;
        resolution = { key, checkedAt: now, kind: 'file', file };
      }
    }
    if (!resolution) {
      const sans = canonicalCertificateNames((await this.options.sanFor?.(name)) ?? [name]);
      if (!sans.some((san) => certificateNameCovers(san, name))) {
        throw new Error(`sanFor("${name}") returned ${sans.join(', ')}, which does not cover it`);
      }
      resolution = { key: `ca:${sans.join(',')}`, checkedAt: now, kind: 'local-ca', sans };
    }
    this.resolutions.set(name, resolution);
    return resolution;
  }

  private renewInBackground(resolution: Resolution, name: string): void {
    this.obtain(resolution, name).catch((err: unknown) => {
      // The current certificate is still valid; the next handshake retries.
      this.options.logger?.warn({ err, name }, 'certificate renewal failed');
    });
  }

  /** Issues or loads the certificate for `resolution`, once however many ask at the same time. */
  private obtain(resolution: Resolution, name: string): Promise<ServedCertificate> {
    const inFlight = this.pending.get(resolution.key);
    if (inFlight) return inFlight;
    const promise = this.create(resolution, name)
      .then((served) => {
        this.entries.set(resolution.key, served);
        return served;
      })
      .finally(() => this.pending.delete(resolution.key));
    this.pending.set(resolution.key, promise);
    return promise;
  }

  private async create(resolution: Resolution, name: string): Promise<ServedCertificate> {
    const started = performance.now();
    if (resolution.kind === 'stored') {
      const { stored } = resolution;
      return {
        context: this.context(stored.certificatePem, stored.privateKeyPem),
        certPem: stored.certificatePem,
        keyPem: stored.privateKeyPem,
        source: 'stored',
        names: [stored.id],
        notAfter: stored.notAfter,
        // Renewal is the ACME client's job; a renewed certificate is a new id, found on recheck.
        renewAt: Number.POSITIVE_INFINITY,
      };
    }
    if (resolution.kind === 'file') {
      try {
        const loaded = await loadCertificateFile(resolution.file, name);
        if (loaded.notAfter.getTime() <= this.now()) {
          this.options.logger?.warn({ file: resolution.file.certPath }, 'certificate file expired');
        }
        return {
          context: this.context(loaded.certPem, loaded.keyPem),
          certPem: loaded.certPem,
          keyPem: loaded.keyPem,
          source: 'file',
          names: [resolution.file.certPath],
          notAfter: loaded.notAfter,
          renewAt: Number.POSITIVE_INFINITY,
        };
      } catch (err) {
        // A broken real certificate must not take the name offline: fall back to the local CA.
        this.options.logger?.warn({ err, name }, 'ignoring unusable certificate file');
        const sans = canonicalCertificateNames([name]);
        return this.create({ key: resolution.key, checkedAt: 0, kind: 'local-ca', sans }, name);
      }
    }
    const issued = await this.options.ca.issue(resolution.sans, { now: new Date(this.now()) });
    const lifetime = issued.notAfter.getTime() - issued.notBefore.getTime();
    this.options.logger?.info(
      { names: issued.names, ms: Math.round(performance.now() - started) },
      'certificate issued',
    );
    return {
      context: this.context(issued.certPem, issued.keyPem),
      certPem: issued.certPem,
      keyPem: issued.keyPem,
      source: 'local-ca',
      names: issued.names,
      notAfter: issued.notAfter,
      // Renew no earlier than two thirds into the lifetime, so short lifetimes do not churn.
      renewAt: issued.notAfter.getTime() - Math.min(this.renewBeforeMs, lifetime / 3),
    };
  }

  private context(cert: string, key: string): SecureContext {
    return createSecureContext({ ...this.options.secureContextOptions, cert, key });
  }
}
