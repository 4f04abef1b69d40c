/**
 * The cluster's own certificate authority: nodes authenticate each other with certificates it
 * issues (mutual TLS on the node links). It is separate from the local CA that signs public
 * certificates, so no certificate the edge serves to the public can ever pass for a node. It lives
 * in the store, as one settings value, so nothing needs configuring: the first node to start
 * creates it, every later one reads it.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { nodeIdProblem } from '../../core/cluster-config.js';
import {
  caSigner,
  issueLeaf,
  newPrivateKeyPem,
  selfSignCa,
  type CaSigner,
} from '../certificates/local-ca.js';
import { parseStoredCa } from '../certificates/shared-ca.js';

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
  const leaf = await issueNodeLeaf(ca.signer, nodeId, now);
  return { caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem, nodeId };
}

interface ClusterCa {
  certPem: string;
  signer: CaSigner;
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
  const { cert: certPem, key: keyPem } = parseStoredCa(stored, CLUSTER_CA_KEY);
  const checked = new X509Certificate(certPem);
  const privateKey = createPrivateKey(keyPem);
  if (!checked.ca || !checked.checkPrivateKey(privateKey)) {
    throw new Error(
      `the settings value ${CLUSTER_CA_KEY} holds a certificate that is not a CA or does not match ` +
        'its key: restore it from a backup, or delete it and restart every node',
    );
  }
  return { certPem: certPem.trim() + '\n', signer: await caSigner(certPem, privateKey) };
}

/** A new CA: EC P-256, 10 years, signs node certificates only (pathLength 0). */
async function newCa(now: Date): Promise<{ cert: string; key: string }> {
  const key = await newPrivateKeyPem();
  return { cert: await selfSignCa(key, now, 'Burrow cluster CA'), key };
}

/**
 * A node certificate: CN = nodeId (what peers check), serverAuth and clientAuth, one year. No
 * SAN: node ids need not be DNS names, and links check the CN, not the address they dialled.
 */
async function issueNodeLeaf(
  ca: CaSigner,
  nodeId: string,
  now: Date,
): Promise<{ certPem: string; keyPem: string }> {
  return issueLeaf(ca, {
    subject: [{ CN: [nodeId] }, { O: ['Burrow cluster'] }],
    now,
    validityDays: LEAF_VALIDITY_DAYS,
    extendedKeyUsages: ['serverAuth', 'clientAuth'],
  });
}
