/**
 * SSH tunnels' test pieces: key pairs made by Debian's ssh-keygen (what users register), and the
 * SSH listener started on an in-process test edge.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { startSshListener, type SshListener } from '../../src/edge/ssh/ssh-listener.js';
import type { SshLimits } from '../../src/edge/ssh/ssh-services.js';
import { TEST_AGENT_SETTINGS } from './agent-edge.js';
import type { SdkTestEdge } from './sdk-edge.js';

/** A key pair made by ssh-keygen: the private key's path, the public line, its fingerprint. */
export interface MadeSshKey {
  path: string;
  /** The `.pub` file's line (`<type> <base64> <comment>`), trimmed. */
  line: string;
  /** `SHA256:…`, as `ssh-keygen -lf` prints it. */
  fingerprint: string;
}

/**
 * A new key pair of `type` (and `bits`) named `name` in `dir`, with no passphrase; throws with
 * ssh-keygen's error when it fails.
 * @example const key = sshKeygen(dir, 'laptop', 'ed25519'); await repos.sshCredentials.create({ public_key: key.line });
 */
export function sshKeygen(dir: string, name: string, type: string, bits?: number): MadeSshKey {
  const path = join(dir, name);
  const made = spawnSync('ssh-keygen', [
    '-q',
    ...['-t', type],
    ...(bits ? ['-b', String(bits)] : []),
    ...['-N', '', '-f', path],
  ]);
  if (made.status !== 0) throw new Error(`ssh-keygen failed: ${made.stderr.toString()}`);
  const printed = spawnSync('ssh-keygen', ['-lf', `${path}.pub`]).stdout.toString();
  return {
    path,
    line: readFileSync(`${path}.pub`, 'utf8').trim(),
    fingerprint: printed.split(' ')[1]!,
  };
}

/**
 * The SSH listener on 127.0.0.1 (a free port) of an in-process test edge, sharing its store,
 * registry and policies, logging nothing.
 * @example const ssh = await startTestSshListener(edge, { maxForwardsPerSession: 2 });
 */
export function startTestSshListener(
  edge: SdkTestEdge,
  limits?: Partial<SshLimits>,
): Promise<SshListener> {
  return startSshListener({
    listen: '127.0.0.1:0',
    dataDir: edge.db.dataDir,
    repos: edge.repos,
    registry: edge.registry,
    policies: edge.listener.policies,
    settings: TEST_AGENT_SETTINGS,
    logger: pino({ level: 'silent' }),
    limits,
  });
}
