import { LRUCache } from 'lru-cache';
import { RateLimitError } from '../core/errors.js';
import { SlidingWindowLimiter } from '../core/sliding-window.js';

/**
 * The dashboard's sign-in limits, made so that they cannot be turned against the person they
 * protect. A limit per user name alone, counted before the password is checked, let anyone lock
 * `admin` out from anywhere by guessing wrong (issue 27 item 8). So:
 *
 * - per client address, every attempt counts (each costs a password hash): 10 a minute;
 * - per user name and client address, failures count: 5 a minute, then that address may not try
 *   that name until the oldest failure is a minute old. The right password from another address
 *   still gets in, however hard an attacker hammers the name from elsewhere.
 *
 * What an attacker spread over many addresses can still do is guess 5 times a minute per address:
 * passwords are at least 8 characters and hashed with scrypt (store/users.ts, docs/security.md).
 */

/** Sign-in attempts per client address per minute. */
export const SIGN_IN_ATTEMPTS_PER_ADDRESS = 10;
/** Failed sign-ins per user name and client address per minute. */
export const SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS = 5;
const WINDOW_MS = 60_000;
/** Name-and-address pairs remembered at once; past it the least recently used goes. */
const MAX_PAIRS = 100_000;

function tooMany(retryAfterMs: number): RateLimitError {
  const retry = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const err = new RateLimitError(retry);
  err.message = `Too many sign-in attempts. Try again in ${retry} seconds.`;
  return err;
}

/**
 * The limits of one API process.
 * @example const limits = new SignInLimits(); limits.admit(ip, name); … limits.failed(ip, name);
 */
export class SignInLimits {
  private readonly byAddress = new SlidingWindowLimiter(SIGN_IN_ATTEMPTS_PER_ADDRESS, WINDOW_MS);
  /** Times (ms) of the recent failures of each name-and-address pair, oldest first. */
  private readonly failures = new LRUCache<string, number[]>({ max: MAX_PAIRS });

  constructor(private readonly now: () => number = Date.now) {}

  /** Throw a RateLimitError when `address` may not try `name` now; counts the attempt. */
  admit(address: string, name: string): void {
    const now = this.now();
    const recent = this.recentFailures(address, name, now);
    if (recent.length >= SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS) {
      throw tooMany(recent[0]! + WINDOW_MS - now);
    }
    const verdict = this.byAddress.take(address, now);
    if (!verdict.allowed) throw tooMany(verdict.retryAfterMs);
  }

  /** Count a wrong password (or unknown name) for `name` from `address`. */
  failed(address: string, name: string): void {
    const now = this.now();
    const recent = this.recentFailures(address, name, now);
    recent.push(now);
    this.failures.set(pairKey(address, name), recent);
  }

  /** A success forgets the pair's failures. */
  succeeded(address: string, name: string): void {
    this.failures.delete(pairKey(address, name));
  }

  private recentFailures(address: string, name: string, now: number): number[] {
    const times = this.failures.get(pairKey(address, name)) ?? [];
    const firstRecent = times.findIndex((t) => t > now - WINDOW_MS);
    return firstRecent < 0 ? [] : times.slice(firstRecent);
  }
}

/** Lower-cased, so that `Admin` and `admin` count together. */
const pairKey = (address: string, name: string): string => `${address}\n${name.toLowerCase()}`;
