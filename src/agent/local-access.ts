/**
 * The checks the device agent's API (local-api.ts) and the agent API on `web_addr`
 * (web-access.ts) share: a secret compared in constant time, and a Host that names this machine
 * directly. Apart from local-api.ts, which loads the policy engine, so the agent API need not.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { parseHostPort } from '../core/host-port.js';

/**
 * Whether `presented` is `expected`, in time that does not depend on where they differ (or on
 * their lengths: both are hashed first).
 * @example tokenMatches('s3cret', 's3cret') // true
 */
export function tokenMatches(presented: string, expected: string): boolean {
  const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/**
 * Whether a Host header names this machine directly: an IP address or a `localhost` name. Other
 * names reach a token-less agent only through DNS rebinding.
 * @example isDirectHost('127.0.0.1:8000') // true
 * @example isDirectHost('evil.example.com:8000') // false
 */
export function isDirectHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = parseHostPort(host, { port: 'optional' })?.host.toLowerCase();
  if (name === undefined) return false;
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost');
}
