import { createHash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from './ids.js';

/**
 * Secrets (API keys, authtokens) are `<id body>_<secret>`: the first part names the stored row,
 * so lookup is by id and the comparison is of hashes, in constant time. Only the hash is stored.
 */
export interface IssuedToken {
  token: string;
  hash: string;
}

/** Issue a token for the resource id `id` (e.g. `cr_...`). */
export function issueToken(id: string): IssuedToken {
  const body = id.slice(id.indexOf('_') + 1);
  const token = `${body}_${randomBase62(32)}`;
  return { token, hash: hashToken(token) };
}

/** SHA-256 of a token, hex. Tokens are 190+ random bits, so a fast hash is enough. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The id body a token claims, or undefined when it is not shaped like one of ours. */
export function tokenIdBody(token: string): string | undefined {
  const m = /^([0-9A-Za-z]{27})_[0-9A-Za-z]{16,64}$/.exec(token);
  return m?.[1];
}

/** Constant-time comparison of a presented token with a stored hash. */
export function tokenMatches(token: string, storedHash: string): boolean {
  const a = Buffer.from(hashToken(token), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A token shown in logs: its id part and a few characters, never the secret. */
export function redactToken(token: string): string {
  return token.length <= 8 ? '[redacted]' : `${token.slice(0, 6)}…[redacted]`;
}
