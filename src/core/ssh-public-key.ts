/**
 * OpenSSH public keys as `/ssh_credentials` stores them and the SSH listener compares them: the
 * line `ssh-keygen` writes (`ssh-ed25519 AAAA… comment`) read into its type, key blob, size and
 * the `SHA256:` fingerprint `ssh-keygen -lf` prints. Only key types worth trusting are accepted:
 * ed25519, ECDSA (P-256, P-384, P-521) and RSA of at least {@link MIN_RSA_BITS} bits.
 */
import { createHash } from 'node:crypto';

/** RSA keys shorter than this are refused (NIST SP 800-131A; OpenSSH refuses < 1024 anyway). */
export const MIN_RSA_BITS = 2048;

/** The key types accepted, as the blob names them. */
export const SSH_KEY_TYPES = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'ssh-rsa',
] as const;

export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

/** A public key, read and checked. */
export interface SshPublicKey {
  type: SshKeyType;
  /** The wire form of the key (what a client offers during authentication). */
  blob: Buffer;
  /** Key size in bits: 256 for ed25519, the curve's for ECDSA, the modulus's for RSA. */
  bits: number;
  /** `SHA256:<unpadded base64>`, as `ssh-keygen -lf` and OpenSSH's logs print it. */
  fingerprint: string;
  /** `<type> <base64 blob>`: the line without its comment, as stored. */
  line: string;
}

/** Why a key line cannot be used, for the caller to put in its own error. */
export class SshKeyProblem extends Error {}

/** The strings of an SSH wire blob (uint32 length, bytes), in order; throws on a torn blob. */
function wireStrings(blob: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < blob.length) {
    if (at + 4 > blob.length) throw new SshKeyProblem('the key data is truncated');
    const length = blob.readUInt32BE(at);
    at += 4;
    if (at + length > blob.length) throw new SshKeyProblem('the key data is truncated');
    out.push(blob.subarray(at, at + length));
    at += length;
  }
  return out;
}

/** Bits of an SSH mpint (big-endian, maybe with a leading 0 byte for the sign). */
function mpintBits(value: Buffer): number {
  let i = 0;
  while (i < value.length && value[i] === 0) i++;
  if (i === value.length) return 0;
  return (value.length - i - 1) * 8 + (32 - Math.clz32(value[i]!));
}

/**
 * The `SHA256:` fingerprint of a key blob.
 * @example sshFingerprint(key.blob) // 'SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8'
 */
export function sshFingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

const CURVE_BITS: Record<string, number> = { nistp256: 256, nistp384: 384, nistp521: 521 };

/**
 * Read and check a key blob: a type Burrow accepts, well formed, RSA of at least 2048 bits.
 * Throws SshKeyProblem saying what is wrong.
 */
export function checkSshKeyBlob(blob: Buffer): SshPublicKey {
  const parts = wireStrings(blob);
  const type = parts[0]?.toString('latin1') ?? '';
  if (!(SSH_KEY_TYPES as readonly string[]).includes(type)) {
    throw new SshKeyProblem(
      `the key type ${JSON.stringify(type.slice(0, 40))} is not accepted; use ed25519, ECDSA or RSA (at least ${MIN_RSA_BITS} bits)`,
    );
  }
  let bits: number;
  if (type === 'ssh-ed25519') {
    if (parts.length !== 2 || parts[1]!.length !== 32)
      throw new SshKeyProblem('malformed ed25519 key');
    bits = 256;
  } else if (type === 'ssh-rsa') {
    if (parts.length !== 3) throw new SshKeyProblem('malformed RSA key');
    bits = mpintBits(parts[2]!);
    if (bits < MIN_RSA_BITS) {
      throw new SshKeyProblem(
        `an RSA key of ${bits} bits is too weak; use at least ${MIN_RSA_BITS} bits (ssh-keygen -t rsa -b 3072), or ed25519`,
      );
    }
  } else {
    const curve = type.slice('ecdsa-sha2-'.length);
    if (parts.length !== 3 || parts[1]!.toString('latin1') !== curve) {
      throw new SshKeyProblem('malformed ECDSA key');
    }
    bits = CURVE_BITS[curve]!;
  }
  return {
    type: type as SshKeyType,
    blob,
    bits,
    fingerprint: sshFingerprint(blob),
    line: `${type} ${blob.toString('base64')}`,
  };
}

/**
 * Read an OpenSSH public key line (`<type> <base64> [comment]`, as in `id_ed25519.pub`).
 * Throws SshKeyProblem saying what is wrong.
 * @example parseSshPublicKey('ssh-ed25519 AAAAC3Nza… me@laptop').fingerprint
 */
export function parseSshPublicKey(text: string): SshPublicKey {
  const fields = text.trim().split(/\s+/);
  if (fields.length < 2 || fields[1] === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(fields[1])) {
    throw new SshKeyProblem(
      'not an OpenSSH public key line: expected "<type> <base64 key> [comment]", as in ~/.ssh/id_ed25519.pub',
    );
  }
  const key = checkSshKeyBlob(Buffer.from(fields[1], 'base64'));
  if (key.type !== fields[0]) {
    throw new SshKeyProblem(
      `the line says ${JSON.stringify(fields[0]?.slice(0, 40))} but the key is ${key.type}`,
    );
  }
  return key;
}
