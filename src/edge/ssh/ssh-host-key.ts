/**
 * The SSH listener's host key: an ed25519 key made once and kept in the data folder
 * (`ssh_host_ed25519_key`, mode 0600), so clients that pinned its fingerprint keep trusting the
 * server across restarts. Processes sharing a data folder race for it safely: the first file
 * written wins (publishExclusive), as the local CA's key.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { parseSshPublicKey } from '../../core/ssh-public-key.js';
import { publishExclusive } from '../certificates/local-ca.js';

// ssh2 is CommonJS: its named exports come through the default one.
const { utils } = ssh2;

export const SSH_HOST_KEY_FILE = 'ssh_host_ed25519_key';

/** The host key: its private key in OpenSSH form, and what clients see of it. */
export interface SshHostKey {
  privateKey: string;
  /** `ssh-ed25519 AAAA…`, the line for a client's known_hosts. */
  publicLine: string;
  /** `SHA256:…`, as OpenSSH prints it when it asks whether to trust the host. */
  fingerprint: string;
}

/** The public line of an OpenSSH private key, read with ssh2 (which wrote it). */
function publicLineOf(privateKey: string, path: string): string {
  const parsed = utils.parseKey(privateKey);
  if (parsed instanceof Error || Array.isArray(parsed)) {
    throw new Error(
      `${path} is not an OpenSSH private key: restore it, or delete it to make a new host key (clients then see a new fingerprint)`,
    );
  }
  return `${parsed.type} ${parsed.getPublicSSH().toString('base64')}`;
}

/**
 * Load the host key from `dataDir`, making it first when there is none.
 * @example const key = await loadOrCreateSshHostKey('./burrow-data'); key.fingerprint // 'SHA256:…'
 */
export async function loadOrCreateSshHostKey(dataDir: string): Promise<SshHostKey> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, SSH_HOST_KEY_FILE);
  let privateKey: string;
  try {
    privateKey = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await publishExclusive(path, utils.generateKeyPairSync('ed25519').private, 0o600);
    privateKey = await readFile(path, 'utf8');
  }
  const publicLine = publicLineOf(privateKey, path);
  return { privateKey, publicLine, fingerprint: parseSshPublicKey(publicLine).fingerprint };
}
