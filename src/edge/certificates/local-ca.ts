import {
  X509Certificate,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  type KeyObject,
} from 'node:crypto';
import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { canonicalCertificateNames, isIpLiteral } from './certificate-names.js';
import { EC_P256, subtle, x509, type CryptoKey } from './x509.js';

const generateKeyPairAsync = promisify(generateKeyPair);

const DAY_MS = 24 * 60 * 60 * 1000;
/** Backdating absorbs clock skew between the edge and its clients. */
const BACKDATE_MS = 60 * 60 * 1000;
const CA_VALIDITY_DAYS = 3650;
/** Public CAs issue for 90 days; clients are used to that lifetime. */
export const LEAF_VALIDITY_DAYS = 90;

/** A freshly issued leaf certificate and its key, ready for `tls.createSecureContext`. */
export interface IssuedCertificate {
  /** The leaf followed by the CA certificate, PEM. */
  certPem: string;
  /** The leaf's PKCS#8 private key, PEM. */
  keyPem: string;
  /** The SANs, normalized, in the order given. */
  names: string[];
  serialNumber: string;
  notBefore: Date;
  notAfter: Date;
}

export interface IssueOptions {
  /** The issuance time; tests move it. Default: now. */
  now?: Date;
  /** Default 90; never beyond the CA's own expiry. */
  validityDays?: number;
}

/**
 * The edge's local certificate authority: an ECDSA P-256 key and a 10-year self-signed CA
 * certificate kept in the data folder as `ca.pem` (0644) and `ca-key.pem` (0600). Agents trust it
 * with `--ca <data-dir>/ca.pem`.
 * @example
 * const ca = await LocalCa.loadOrCreate('./burrow-data');
 * const { certPem, keyPem } = await ca.issue(['localhost', '127.0.0.1']);
 */
export class LocalCa {
  static readonly CERT_FILE = 'ca.pem';
  static readonly KEY_FILE = 'ca-key.pem';

  private constructor(
    /** The CA certificate, PEM. */
    readonly certPem: string,
    /** Where the CA certificate lives (what agents are pointed at). */
    readonly certPath: string,
    readonly notAfter: Date,
    private readonly signer: CaSigner,
  ) {}

  /** The CA's distinguished name, e.g. `CN=Burrow local CA 1a2b3c4d, O=Burrow`. */
  get subject(): string {
    return this.signer.name.toString();
  }

  /**
   * Loads the CA from `dataDir`, creating it on first use. Files appear atomically and are never
   * overwritten: each is written to a temporary file, fsynced, then hard-linked into place (a link
   * fails rather than replaces when the name exists). The key is published first and the
   * certificate is made from whatever key is on disk, so processes starting together, or a start
   * after a crash between the two files, always end with one matching pair.
   * @example const ca = await LocalCa.loadOrCreate('/var/lib/burrow');
   */
  static async loadOrCreate(dataDir: string, options: { now?: Date } = {}): Promise<LocalCa> {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const certPath = join(dataDir, LocalCa.CERT_FILE);
    const keyPath = join(dataDir, LocalCa.KEY_FILE);
    // Three rounds suffice (key, certificate, load); the rest is slack for odd filesystems.
    for (let round = 0; round < 6; round++) {
      // The certificate first: the key is published before it, so a key read after a certificate
      // was seen is there. Read the other way round, a key published and certified by another
      // process between the two reads looked like a certificate without its key.
      const certPem = await readIfExists(certPath);
      const keyPem = await readIfExists(keyPath);
      if (certPem !== undefined) {
        if (keyPem === undefined) {
          throw new Error(
            `${certPath} exists but ${keyPath} is missing: restore the key, or delete ${certPath} ` +
              'to create a new CA (agents then need the new ca.pem)',
          );
        }
        return LocalCa.fromPem(certPem, keyPem, certPath);
      }
      if (keyPem === undefined) {
        await publishExclusive(keyPath, await newPrivateKeyPem(), 0o600);
      } else {
        await publishExclusive(
          certPath,
          await selfSignCa(keyPem, options.now ?? new Date()),
          0o644,
        );
      }
    }
    throw new Error(`could not create the local CA in ${dataDir}`);
  }

  /**
   * Checks that `certPem` is a CA certificate whose public key matches `keyPem`.
   * @example const ca = await LocalCa.fromPem(certText, keyText, '/data/ca.pem');
   */
  static async fromPem(certPem: string, keyPem: string, certPath: string): Promise<LocalCa> {
    const cert = new X509Certificate(certPem);
    const privateKey = createPrivateKey(keyPem);
    if (!cert.ca) throw new Error(`${certPath} is not a CA certificate`);
    if (!cert.checkPrivateKey(privateKey)) {
      throw new Error(
        `${certPath} does not match its key ${LocalCa.KEY_FILE}: restore the matching pair, or ` +
          'delete both to create a new CA',
      );
    }
    const signer = await caSigner(certPem, privateKey);
    return new LocalCa(certPem.trim() + '\n', certPath, signer.notAfter, signer);
  }

  /**
   * Issues a server certificate for `names`: DNS names (wildcards such as `*.sitea.example.com`
   * included) and IP literals, which become iPAddress SANs. ECDSA P-256, serverAuth, 90 days.
   * Throws a TypeError naming any name that cannot be certified.
   * @example await ca.issue(['localhost', '127.0.0.1', '::1'])
   */
  async issue(names: readonly string[], options: IssueOptions = {}): Promise<IssuedCertificate> {
    const sans = canonicalCertificateNames(names);
    const firstDns = sans.find((n) => !isIpLiteral(n));
    // The CN is informational (clients match SANs) and limited to 64 characters.
    const commonName = firstDns !== undefined && firstDns.length <= 64 ? firstDns : 'Burrow edge';
    const leaf = await issueLeaf(this.signer, {
      subject: [{ CN: [commonName] }],
      now: options.now ?? new Date(),
      validityDays: options.validityDays ?? LEAF_VALIDITY_DAYS,
      extendedKeyUsages: ['serverAuth'],
      sans,
    });
    return {
      certPem: leaf.certPem + this.certPem,
      keyPem: leaf.keyPem,
      names: sans,
      serialNumber: leaf.serialNumber,
      notBefore: leaf.notBefore,
      notAfter: leaf.notAfter,
    };
  }
}

/** What signs with a CA: its name, expiry, key and key identifier. */
export interface CaSigner {
  /** The CA's name exactly as encoded in its certificate, reused verbatim as each leaf's issuer. */
  name: x509.Name;
  notAfter: Date;
  signingKey: CryptoKey;
  subjectKeyId: string;
}

/**
 * The signing side of the CA certificate `certPem`, whose key (already checked to match) is
 * `privateKey`.
 * @example const signer = await caSigner(certPem, createPrivateKey(keyPem));
 */
export async function caSigner(certPem: string, privateKey: KeyObject): Promise<CaSigner> {
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const signingKey = await subtle.importKey('pkcs8', pkcs8, EC_P256, false, ['sign']);
  const parsed = new x509.X509Certificate(certPem);
  const ski = parsed.getExtension(x509.SubjectKeyIdentifierExtension);
  const subjectKeyId =
    ski?.keyId ?? (await x509.SubjectKeyIdentifierExtension.create(parsed.publicKey)).keyId;
  return { name: parsed.subjectName, notAfter: parsed.notAfter, signingKey, subjectKeyId };
}

/** What a leaf certificate says besides its issuer. */
export interface LeafSpec {
  subject: x509.JsonName;
  /** The issuance time; the leaf starts an hour before it to absorb clock skew. */
  now: Date;
  /** Capped at the CA's own expiry. */
  validityDays: number;
  extendedKeyUsages: ('serverAuth' | 'clientAuth')[];
  /** Normalized DNS names and IP literals; no SAN extension when absent. */
  sans?: readonly string[];
}

/**
 * A fresh ECDSA P-256 key and an end-entity certificate for it signed by `ca`.
 * @example await issueLeaf(signer, { subject: [{ CN: ['edge-a'] }], now, validityDays: 365, extendedKeyUsages: ['clientAuth'] })
 */
export async function issueLeaf(
  ca: CaSigner,
  spec: LeafSpec,
): Promise<{
  certPem: string;
  keyPem: string;
  serialNumber: string;
  notBefore: Date;
  notAfter: Date;
}> {
  const notBefore = new Date(spec.now.getTime() - BACKDATE_MS);
  const wanted = spec.now.getTime() + spec.validityDays * DAY_MS;
  const notAfter = new Date(Math.min(wanted, ca.notAfter.getTime()));
  const { publicKey, privateKey } = await generateKeyPairAsync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const serialNumber = randomSerial();
  const sans = spec.sans;
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber,
    subject: spec.subject,
    issuer: ca.name,
    notBefore,
    notAfter,
    signingAlgorithm: EC_P256,
    publicKey: spki,
    signingKey: ca.signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(
        spec.extendedKeyUsages.map((u) => x509.ExtendedKeyUsage[u]),
      ),
      ...(sans === undefined
        ? []
        : [
            new x509.SubjectAlternativeNameExtension(
              sans.map((value) => ({ type: isIpLiteral(value) ? 'ip' : 'dns', value })),
            ),
          ]),
      await x509.SubjectKeyIdentifierExtension.create(spki),
      new x509.AuthorityKeyIdentifierExtension(ca.subjectKeyId),
    ],
  });
  return {
    certPem: leaf.toString('pem') + '\n',
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    serialNumber,
    notBefore,
    notAfter,
  };
}

/** 16 random bytes, positive (top bit clear) and never starting with a zero byte. */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString('hex');
}

/**
 * A new ECDSA P-256 private key, PKCS#8 PEM.
 * @example const keyPem = await newPrivateKeyPem();
 */
export async function newPrivateKeyPem(): Promise<string> {
  const { privateKey } = await generateKeyPairAsync('ec', { namedCurve: 'P-256' });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/**
 * A 10-year self-signed CA certificate (PEM) for `keyPem`, named `CN=<label> <8 hex>, O=Burrow`;
 * pathLength 0, so it signs leaves only.
 * @example const certPem = await selfSignCa(keyPem, new Date(), 'Burrow cluster CA');
 */
export async function selfSignCa(
  keyPem: string,
  now: Date,
  label = 'Burrow local CA',
): Promise<string> {
  const privateKey = createPrivateKey(keyPem);
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const signingKey = await subtle.importKey('pkcs8', pkcs8, EC_P256, false, ['sign']);
  const name: x509.JsonName = [
    { CN: [`${label} ${randomBytes(4).toString('hex')}`] },
    { O: ['Burrow'] },
  ];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: name,
    issuer: name,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    signingAlgorithm: EC_P256,
    publicKey: spki,
    signingKey,
    extensions: [
      // pathLength 0: this CA signs leaves only, never intermediates.
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(spki),
    ],
  });
  return cert.toString('pem') + '\n';
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Writes `content` to `path` with `mode`, all or nothing, unless `path` already exists (then the
 * existing file wins and this is a no-op). Exported for tests.
 * @example await publishExclusive('/data/ca-key.pem', pem, 0o600)
 */
export async function publishExclusive(path: string, content: string, mode: number): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const handle = await open(temp, 'wx', mode);
    try {
      // chmod explicitly: the umask could otherwise narrow 0644 or the open mode be ignored.
      await handle.chmod(mode);
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await link(temp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    await rm(temp, { force: true });
  }
  await syncDirectory(dirname(path));
}

/** Makes the new directory entry durable; some platforms cannot open directories, which is fine. */
async function syncDirectory(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // Best effort: Windows and some network filesystems refuse fsync on a directory.
  } finally {
    await handle?.close();
  }
}
