/**
 * What an agent trusts when it dials the edge: the system's roots, plus the CAs it was given
 * (`ca`), optionally narrowed to one pinned certificate (`caFingerprint`, trust on first use like
 * SSH). Node's `tls.connect({ ca })` *replaces* its roots, so the roots are added back here: an
 * agent listener with a publicly trusted certificate works with or without a `ca`.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { LRUCache } from 'lru-cache';
import { BurrowAgentError } from './errors.js';

/** The prefix Burrow writes before a SHA-256 fingerprint, as `burrow server` prints it. */
const FINGERPRINT_PREFIX = 'sha256:';

/**
 * Read a SHA-256 certificate fingerprint as people paste it: with or without colons (or spaces),
 * any case, with an optional `sha256:` prefix. Returns Node's form (`fingerprint256`: upper case,
 * colon-separated) so it compares directly; throws a BurrowAgentError for anything else.
 * @example parseCaFingerprint('sha256:ab:cd:…') // 'AB:CD:…'
 */
export function parseCaFingerprint(text: string): string {
  // `openssl x509 -noout -fingerprint -sha256` prints `sha256 Fingerprint=AB:…`: accepted too.
  const hex = text
    .trim()
    .replace(/^sha-?256(\s*fingerprint)?\s*[:=]/i, '')
    .replace(/[\s:]/g, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
    throw new BurrowAgentError(
      `the CA fingerprint must be a SHA-256 one, 64 hexadecimal digits with or without colons, ` +
        `like the sha256:AB:CD:… that \`burrow server\` prints at start; got '${text}'`,
    );
  }
  return hex.toUpperCase().replace(/(..)(?!$)/g, '$1:');
}

/**
 * A fingerprint in Node's form as Burrow prints it.
 * @example formatFingerprint('AB:CD') // 'sha256:AB:CD'
 */
export function formatFingerprint(fingerprint256: string): string {
  return `${FINGERPRINT_PREFIX}${fingerprint256}`;
}

/**
 * The SHA-256 fingerprint of a PEM certificate (the first in the text), as Burrow prints it.
 * @example certificateFingerprint(readFileSync('burrow-data/ca.pem', 'utf8')) // 'sha256:AB:…'
 */
export function certificateFingerprint(pem: string | Buffer): string {
  return formatFingerprint(new X509Certificate(pem).fingerprint256);
}

/**
 * The certificates of a PEM text, each as its own PEM block; anything between blocks is dropped.
 * @example splitPemCertificates(caBundle).length // 2
 */
export function splitPemCertificates(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

let systemRoots: readonly string[] | undefined;

/**
 * What Node trusts when no `ca` is given: its bundled roots and the file in
 * `NODE_EXTRA_CA_CERTS`, which `tls.rootCertificates` leaves out.
 * @example tls.connect({ ca: [...defaultRootCertificates(), myCa] })
 */
export function defaultRootCertificates(): readonly string[] {
  if (systemRoots) return systemRoots;
  const roots = [...tls.rootCertificates];
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  if (extra) {
    try {
      roots.push(...splitPemCertificates(readFileSync(extra, 'utf8')));
    } catch {
      // Node itself only warns about an unreadable NODE_EXTRA_CA_CERTS; so do we, by ignoring it.
    }
  }
  systemRoots = roots;
  return roots;
}

/** A CA as the `ca` option takes it: PEM text, PEM bytes, or the path of a PEM file. */
export type CaSource = string | Buffer;

/**
 * The CA certificate(s) to trust, from PEM text, PEM bytes or the path of a PEM file.
 * @example loadCa('./burrow-data/ca.pem')
 */
export function loadCa(ca: CaSource): string | Buffer {
  if (Buffer.isBuffer(ca)) return ca;
  if (ca.includes('-----BEGIN')) return ca;
  try {
    return readFileSync(ca);
  } catch (err) {
    throw new BurrowAgentError(
      `cannot read the CA file '${ca}': ${(err as Error).message}. Pass the PEM text or the path of the server's ca.pem.`,
      undefined,
      { cause: err },
    );
  }
}

/**
 * The trust of one session: the PEM certificates it adds to the system roots, and the pinned
 * fingerprint. Once a dial has seen the pinned certificate, `pinned` keeps it, so reconnects verify
 * against it directly.
 */
export interface EdgeTrust {
  /** Certificates trusted on top of the system roots (PEM, one per entry). */
  extra: string[];
  /** Node's form of the pinned SHA-256 fingerprint (`AB:CD:…`). */
  pin: string | undefined;
  /** The pinned certificate once known (PEM): from `extra`, or learnt from the server's chain. */
  pinned: string | undefined;
}

/**
 * Build a session's trust from the `ca` and `caFingerprint` options; throws a BurrowAgentError for
 * an unreadable file, a file with no certificate, or a malformed fingerprint.
 * @example resolveTrust(['./burrow-data/ca.pem'], 'sha256:AB:…')
 */
export function resolveTrust(
  ca: CaSource | readonly CaSource[] | undefined,
  caFingerprint: string | undefined,
): EdgeTrust {
  const sources: readonly CaSource[] = ca === undefined ? [] : Array.isArray(ca) ? ca : [ca];
  const extra: string[] = [];
  for (const source of sources as CaSource[]) {
    const pems = splitPemCertificates(String(loadCa(source)));
    if (pems.length === 0) {
      const what = typeof source === 'string' && !source.includes('-----BEGIN') ? source : 'ca';
      throw new BurrowAgentError(
        `${what} holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the server's ca.pem`,
      );
    }
    extra.push(...pems);
  }
  const pin = caFingerprint === undefined ? undefined : parseCaFingerprint(caFingerprint);
  const pinned = pin === undefined ? undefined : extra.find((pem) => fingerprintOf(pem) === pin);
  return { extra, pin, pinned };
}

function fingerprintOf(pem: string): string | undefined {
  try {
    return new X509Certificate(pem).fingerprint256;
  } catch {
    return undefined;
  }
}

/**
 * The trust anchors of a dial: with a known pinned self-signed certificate, that one alone (so
 * OpenSSL checks every signature up to exactly the pinned CA); otherwise the system roots, the
 * extra CAs and the pinned certificate when it is not a root (an intermediate or a leaf cannot be
 * an anchor on its own in Node 20, so its chain has to reach a trusted root).
 * @example tls.connect({ ca: trustAnchors(trust), ... })
 */
export function trustAnchors(trust: EdgeTrust): string[] {
  if (trust.pinned !== undefined && isSelfSigned(trust.pinned)) return [trust.pinned];
  const anchors = [...defaultRootCertificates(), ...trust.extra];
  if (trust.pinned !== undefined) anchors.push(trust.pinned);
  return anchors;
}

/**
 * Secure contexts by the trust they hold. Building one parses every anchor (Node's ~140 roots and
 * the extra CAs): about 70 ms of CPU and 0.9 MB, so one process's sessions and reconnects with the
 * same trust share one context instead of paying that per dial.
 */
const contexts = new LRUCache<string, tls.SecureContext>({ max: 32 });

/**
 * The secure context a dial verifies the edge with: the anchors of `trustAnchors`, built once per
 * distinct trust (the extra CAs and the pinned certificate) in this process.
 * @example tls.connect({ secureContext: trustContext(trust), ... })
 */
export function trustContext(trust: EdgeTrust): tls.SecureContext {
  const hash = createHash('sha256');
  for (const pem of trust.extra) hash.update(pem).update('\0');
  hash.update(trust.pinned === undefined ? '-' : `pinned\0${trust.pinned}`);
  const key = hash.digest('hex');
  let context = contexts.get(key);
  if (!context) {
    context = tls.createSecureContext({ ca: trustAnchors(trust), minVersion: 'TLSv1.2' });
    contexts.set(key, context);
  }
  return context;
}

function isSelfSigned(pem: string): boolean {
  const cert = new X509Certificate(pem);
  return cert.checkIssued(cert) && cert.verify(cert.publicKey);
}
