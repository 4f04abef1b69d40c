import { describe, expect, it } from 'vitest';
import {
  SignInLimits,
  SIGN_IN_ATTEMPTS_PER_ADDRESS,
  SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS,
} from './sign-in-limits.js';

/** Sign-in limits on a clock the test moves. */
function limitsAt(start = 1_000_000) {
  const clock = { now: start };
  return { clock, limits: new SignInLimits(() => clock.now) };
}

/** One sign-in attempt that fails: 'refused' when the limits stop it before the password. */
function wrongGuess(limits: SignInLimits, address: string, name: string): 'failed' | 'refused' {
  try {
    limits.admit(address, name);
  } catch {
    return 'refused';
  }
  limits.failed(address, name);
  return 'failed';
}

describe('SignInLimits', () => {
  it('counts failures per name and address: guesses from two addresses do not lock the name out of a third', () => {
    const { limits } = limitsAt();
    const outcomes = ['192.0.2.1', '192.0.2.2'].flatMap((address) =>
      Array.from({ length: 6 }, () => wrongGuess(limits, address, 'admin')),
    );
    const failed = SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS;
    expect(outcomes.filter((o) => o === 'failed')).toHaveLength(2 * failed);
    expect(outcomes.filter((o) => o === 'refused')).toHaveLength(12 - 2 * failed);
    expect(() => limits.admit('198.51.100.7', 'admin')).not.toThrow();
    // Case does not make a new name.
    expect(() => limits.admit('192.0.2.1', 'ADMIN')).toThrow(/Too many sign-in attempts/);
  });

  it('says when to come back, and forgets failures a minute old', () => {
    const { clock, limits } = limitsAt();
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS; i++) {
      wrongGuess(limits, '192.0.2.1', 'admin');
      clock.now += 1000;
    }
    expect(() => limits.admit('192.0.2.1', 'admin')).toThrow(
      `Too many sign-in attempts. Try again in ${60 - SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS} seconds.`,
    );
    clock.now += 60_000;
    expect(wrongGuess(limits, '192.0.2.1', 'admin')).toBe('failed');
  });

  it('a success forgets the failures of its name and address', () => {
    const { limits } = limitsAt();
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS - 1; i++) {
      wrongGuess(limits, '192.0.2.1', 'grace');
    }
    limits.succeeded('192.0.2.1', 'grace');
    for (let i = 0; i < SIGN_IN_FAILURES_PER_NAME_AND_ADDRESS - 1; i++) {
      expect(wrongGuess(limits, '192.0.2.1', 'grace')).toBe('failed');
    }
  });

  it('limits every attempt per address, whatever the name', () => {
    const { limits } = limitsAt();
    const outcomes = Array.from({ length: SIGN_IN_ATTEMPTS_PER_ADDRESS + 1 }, (_, i) =>
      wrongGuess(limits, '192.0.2.9', `user${i}`),
    );
    expect(outcomes.at(-1)).toBe('refused');
    expect(outcomes.slice(0, -1).every((o) => o === 'failed')).toBe(true);
    expect(wrongGuess(limits, '192.0.2.10', 'user0')).toBe('failed');
  });
});
