import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sshKeygen } from '../../test/support/ssh.js';
import { parseSshPublicKey, SshKeyProblem } from './ssh-public-key.js';

/** Keys made by Debian's ssh-keygen, and the fingerprints it prints for them. */
const dir = mkdtempSync(join(tmpdir(), 'burrow-sshkey-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keygen = (name: string, type: string, bits?: number) => sshKeygen(dir, name, type, bits);

describe('parseSshPublicKey', () => {
  it.each([
    ['ed25519', undefined, 'ssh-ed25519', 256],
    ['ecdsa', 256, 'ecdsa-sha2-nistp256', 256],
    ['ecdsa', 521, 'ecdsa-sha2-nistp521', 521],
    ['rsa', 2048, 'ssh-rsa', 2048],
  ] as const)(
    'reads %s %s keys with the fingerprint ssh-keygen prints',
    (type, bits, name, size) => {
      const made = keygen(`${type}${bits ?? ''}`, type, bits);
      const key = parseSshPublicKey(made.line);
      expect(key).toMatchObject({ type: name, bits: size, fingerprint: made.fingerprint });
      // The comment is dropped; the rest is kept as given.
      expect(made.line.startsWith(key.line)).toBe(true);
    },
  );

  it('refuses RSA under 2048 bits, naming the size', () => {
    const made = keygen('rsa1024', 'rsa', 1024);
    expect(() => parseSshPublicKey(made.line)).toThrow(/RSA key of 1024 bits is too weak/);
  });

  it('refuses what is not a key line, a torn blob, and a type that contradicts the blob', () => {
    const ed = keygen('ed2', 'ed25519').line.split(' ');
    expect(() => parseSshPublicKey('hello')).toThrow(SshKeyProblem);
    expect(() => parseSshPublicKey(`ssh-ed25519 ${ed[1]!.slice(0, 20)}`)).toThrow(
      /truncated|malformed/,
    );
    expect(() => parseSshPublicKey(`ssh-rsa ${ed[1]!}`)).toThrow(
      /says "ssh-rsa" but the key is ssh-ed25519/,
    );
    expect(() => parseSshPublicKey('ssh-dss AAAAB3NzaC1kc3MAAAA=')).toThrow(SshKeyProblem);
  });
});
