/**
 * The cluster's own certificate authority: nodes authenticate each other with certificates it
 * issues (mutual TLS on the node links). It is separate from the local CA that signs public
 * certificates, so no certificate the edge serves to the public can ever pass for a node. It lives
 * in the store, as one settings value, so nothing needs configuring: the first node to start
 * creates it, every later one reads it.
 */
// @peculiar/x509's dependency injection (tsyringe) needs the Reflect metadata API loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { X509Certificate, createPrivateKey, generateKeyPair, randomBytes } from 'node:crypto';
import { webcrypto } from 'node:crypto';
import { promisify } from 'node:util';

// Node's WebCrypto is structurally the DOM Crypto the library is typed against (as in
// src/edge/certificates/x509.ts, which this folder may not import).
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const generateKeyPairAsync = promisify(generateKeyPair);

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Backdating absorbs clock skew between nodes. */
const BACKDATE_MS = 60 * 60 * 1000;
const CA_VALIDITY_DAYS = 3650;
const LEAF_VALIDITY_DAYS = 365;

/** The settings key of the cluster CA: JSON `{"cert": PEM, "key": PKCS#8 PEM}`. */
export const CLUSTER_CA_KEY = 'cluster_ca';

/** What a node needs for its links: the cluster CA, and its own certificate and key. */
export interface NodeCredentials {
  /** The cluster CA certificate, PEM: the only issuer a node trusts for other nodes. */
  caPem: string;
  /** This node's certificate (CN = nodeId; serverAuth and clientAuth), PEM. */
  certPem: string;
  /** This node's PKCS#8 private key, PEM. */
  keyPem: string;
  nodeId: string;
}

/**
 * The settings-like store the CA lives in (SettingsRepository in src/store/settings.ts):
 * `getOrCreate` is race-safe, concurrent callers agree on one value.
 */
export interface CaSettings {
  getOrCreate(key: string, make: () => string): Promise<string>;
}

/**
 * Node ids as certificates carry them (the CN, at most 64 characters): generated ids such as
 * `node_2abc…` and chosen ones such as `edge-a`.
 */
const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * Why `nodeId` cannot name a node, or undefined when it can.
 * @example nodeIdProblem('edge a') // 'must be 1-64 letters, digits, "_", "." or "-", …'
 */
export function nodeIdProblem(nodeId: string): string | undefined {
  return NODE_ID_RE.test(nodeId)
    ? undefined
    : 'must be 1-64 letters, digits, "_", "." or "-", starting with a letter or digit';
}

/**
 * This node's credentials: the cluster CA (created in `settings` on first use) and a fresh leaf
 * for `nodeId`, issued at each start and never stored.
 * @example const credentials = await nodeCredentials(store.settings, 'node_2abc');
 */
export async function nodeCredentials(
  settings: CaSettings,
  nodeId: string,
): Promise<NodeCredentials> {
  const problem = nodeIdProblem(nodeId);
  if (problem) throw new TypeError(`node id "${nodeId}" ${problem}`);
  const now = new Date();
  const ca = await loadCa(settings, now);
  const leaf = await issueLeaf(ca, nodeId, now);
  return { caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem, nodeId };
}

interface ClusterCa {
  certPem: string;
  cert: x509.X509Certificate;
  signingKey: webcrypto.CryptoKey;
  subjectKeyId: string;
}

/**
 * The CA from the settings, created when absent. `make` must be synchronous, so a candidate CA is
 * generated first; when another node stored one meanwhile, the candidate is dropped and theirs
 * is used. Certificate and key are one value, so they always match.
 */
async function loadCa(settings: CaSettings, now: Date): Promise<ClusterCa> {
  const candidate = JSON.stringify(await newCa(now));
  const stored = await settings.getOrCreate(CLUSTER_CA_KEY, () => candidate);
  return parseCa(stored);
}

async function parseCa(stored: string): Promise<ClusterCa> {
  let certPem: unknown;
  let keyPem: unknown;
  try {
    ({ cert: certPem, key: keyPem } = JSON.parse(stored) as { cert?: unknown; key?: unknown });
  } catch {
    // Reported below.
  }
  if (typeof certPem !== 'string' || typeof keyPem !== 'string') {
    throw new Error(`the settings value ${CLUSTER_CA_KEY} is not a cluster CA ({cert, key} PEM)`);
  }
  const checked = new X509Certificate(certPem);
  const privateKey = createPrivateKey(keyPem);
  if (!checked.ca || !checked.checkPrivateKey(privateKey)) {
    throw new Error(
      `the settings value ${CLUSTER_CA_KEY} holds a certificate that is not a CA or does not match its key`,
    );
  }
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const signingKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, EC_P256, false, ['sign']);
  const cert = new x509.X509Certificate(certPem);
  const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension);
  const subjectKeyId =
    ski?.keyId ?? (await x509.SubjectKeyIdentifierExtension.create(cert.publicKey)).keyId;
  return { certPem: certPem.trim() + '\n', cert, signingKey, subjectKeyId };
}

/** A new CA: EC P-256, 10 years, signs node certificates only (pathLength 0). */
async function newCa(now: Date): Promise<{ cert: string; key: string }> {
  const { publicKey, privateKey } = await generateKeyPairAsync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
  const signingKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, EC_P256, false, ['sign']);
  const name: x509.JsonName = [
    { CN: [`Burrow cluster CA ${randomBytes(4).toString('hex')}`] },
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
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(spki),
    ],
  });
  return {
    cert: cert.toString('pem') + '\n',
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/**
 * A node certificate: CN = nodeId (what peers check), serverAuth and clientAuth, one year. No
 * SAN: node ids need not be DNS names, and links check the CN, not the address they dialled.
 */
async function issueLeaf(
  ca: ClusterCa,
  nodeId: string,
  now: Date,
): Promise<{ certPem: string; keyPem: string }> {
  const { publicKey, privateKey } = await generateKeyPairAsync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const wanted = now.getTime() + LEAF_VALIDITY_DAYS * DAY_MS;
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: [{ CN: [nodeId] }, { O: ['Burrow cluster'] }],
    issuer: ca.cert.subjectName,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(Math.min(wanted, ca.cert.notAfter.getTime())),
    signingAlgorithm: EC_P256,
    publicKey: spki,
    signingKey: ca.signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        x509.ExtendedKeyUsage.serverAuth,
        x509.ExtendedKeyUsage.clientAuth,
      ]),
      await x509.SubjectKeyIdentifierExtension.create(spki),
      new x509.AuthorityKeyIdentifierExtension(ca.subjectKeyId),
    ],
  });
  return {
    certPem: leaf.toString('pem') + '\n',
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/** 16 random bytes, positive (top bit clear) and never starting with a zero byte. */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString('hex');
}
