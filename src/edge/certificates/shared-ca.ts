/**
 * One local CA for a whole cluster: every node signs public and agent-listener certificates with
 * the same CA, so an agent that trusts one node's ca.pem trusts them all and fails over between
 * them. The CA lives in the store (settings `local_ca`) and in each node's data folder, where
 * users find ca.pem.
 */
import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../core/logger.js';
import { LocalCa, publishExclusive } from './local-ca.js';

/** The settings key of the cluster's local CA: JSON `{cert, key}` (PEM), one value, one write. */
const SHARED_CA_KEY = 'local_ca';

/** A CA as one settings value holds it (`local_ca` here, `cluster_ca` for node links). */
export interface StoredCa {
  cert: string;
  key: string;
}

/**
 * The settings value `settingsKey` as a CA: JSON `{"cert": PEM, "key": PKCS#8 PEM}`. Throws an
 * Error that names the value and what to do when it is anything else.
 * @example const { cert, key } = parseStoredCa(await settings.getOrCreate('cluster_ca', make), 'cluster_ca');
 */
export function parseStoredCa(text: string, settingsKey: string): StoredCa {
  let value: Partial<Record<keyof StoredCa, unknown>> | undefined;
  try {
    value = JSON.parse(text) as typeof value;
  } catch {
    // Reported below.
  }
  if (typeof value?.cert !== 'string' || typeof value.key !== 'string') {
    throw new Error(
      `the settings value ${settingsKey} is not a CA ({"cert", "key"} PEM): restore it from a ` +
        'backup, or delete it and restart every node (the first to start stores a new one)',
    );
  }
  return { cert: value.cert, key: value.key };
}

/**
 * The cluster's local CA. The first node to start offers its data folder's CA (so a single node
 * that grows into a cluster keeps the ca.pem its agents trust); a node whose folder holds another
 * CA moves those files aside (`ca.pem.replaced`, `ca-key.pem.replaced`) and takes the cluster's.
 * @example const ca = await sharedLocalCa('/var/lib/burrow', repos.settings, logger);
 */
export async function sharedLocalCa(
  dataDir: string,
  settings: { getOrCreate(key: string, make: () => string): Promise<string> },
  logger: Logger,
): Promise<LocalCa> {
  const own = await LocalCa.loadOrCreate(dataDir);
  const certPath = join(dataDir, LocalCa.CERT_FILE);
  const keyPath = join(dataDir, LocalCa.KEY_FILE);
  const ownKey = await readFile(keyPath, 'utf8');
  const stored = parseStoredCa(
    await settings.getOrCreate(SHARED_CA_KEY, () =>
      JSON.stringify({ cert: own.certPem, key: ownKey }),
    ),
    SHARED_CA_KEY,
  );
  if (stored.cert.trim() === own.certPem.trim()) return own;
  const shared = await LocalCa.fromPem(stored.cert, stored.key, certPath);
  await rename(certPath, `${certPath}.replaced`);
  await rename(keyPath, `${keyPath}.replaced`);
  await publishExclusive(keyPath, stored.key, 0o600);
  await publishExclusive(certPath, shared.certPem, 0o644);
  logger.warn(
    { ca: certPath, previous: `${certPath}.replaced` },
    "this node's data folder held another local CA: it now holds the cluster's (agents that trusted the previous ca.pem need this one)",
  );
  return shared;
}
