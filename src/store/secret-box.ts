import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Encryption of secret values at rest: AES-256-GCM with a random 96-bit nonce per value, the
 * row's id as additional data (a ciphertext copied onto another row does not decrypt), under a
 * key kept in the settings table (`secrets_key`). The key lives in the same database, like the
 * local CA's key: this keeps values out of API reads, exports of the tables, logs and audit
 * events, not away from someone who can read the whole database.
 */

const VERSION = 'v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** A new random key, as the settings table keeps it (base64 of 32 bytes). */
export function newSecretKey(): string {
  return randomBytes(32).toString('base64');
}

function keyBytes(key: string): Buffer {
  const bytes = Buffer.from(key, 'base64');
  if (bytes.length !== 32) throw new Error('settings.secrets_key is not 32 bytes of base64');
  return bytes;
}

/**
 * Encrypt `value` for the row `id`.
 * @example const stored = sealSecret(key, 'sec_...', 'hunter2'); // 'v1:...'
 */
export function sealSecret(key: string, id: string, value: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyBytes(key), nonce);
  cipher.setAAD(Buffer.from(id, 'utf8'));
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return `${VERSION}:${Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64')}`;
}

/** The value `sealSecret(key, id, value)` sealed; throws when the text was altered or moved. */
export function openSecret(key: string, id: string, sealed: string): string {
  if (!sealed.startsWith(`${VERSION}:`)) throw new Error(`secret ${id}: unknown encryption format`);
  const raw = Buffer.from(sealed.slice(VERSION.length + 1), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', keyBytes(key), raw.subarray(0, NONCE_BYTES));
  decipher.setAAD(Buffer.from(id, 'utf8'));
  decipher.setAuthTag(raw.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
  return Buffer.concat([
    decipher.update(raw.subarray(NONCE_BYTES + TAG_BYTES)),
    decipher.final(),
  ]).toString('utf8');
}
