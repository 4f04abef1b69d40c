/**
 * Shared settings of the fast-check property tests. `npm test` runs each target a few thousand
 * times; `npm run fuzz` (BURROW_FUZZ=1) runs each many more times, so that together the targets
 * see a million cases. Every target reports how many cases it ran, so docs/security.md can say.
 */
import { appendFileSync } from 'node:fs';

/** True under `npm run fuzz`. */
export const FUZZ = process.env.BURROW_FUZZ === '1';

/**
 * Cases for a target: `normal` in `npm test`, `fuzz` under `npm run fuzz`.
 * @example fc.assert(property, { numRuns: fuzzRuns(2000, 200_000) });
 */
export function fuzzRuns(normal: number, fuzz: number): number {
  return FUZZ ? fuzz : normal;
}

/**
 * Record that `target` ran `cases` cases: appended as a JSON line to $BURROW_FUZZ_REPORT when set
 * (the fuzz script sums them), else nothing.
 * @example reportFuzz('muxado frame parser', 2000);
 */
export function reportFuzz(target: string, cases: number): void {
  const file = process.env.BURROW_FUZZ_REPORT;
  if (file) appendFileSync(file, `${JSON.stringify({ target, cases })}\n`);
}
