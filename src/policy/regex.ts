import { LRUCache } from 'lru-cache';
import { RE2JS } from 're2js';

/**
 * Regular expressions for policies: RE2 syntax on re2js, which matches in time linear in the
 * input, so no pattern (`^(a+)+$` and friends) can stall the event loop the way a backtracking
 * engine can. Patterns written in a policy are compiled once at save time; patterns built at run
 * time (a CEL `matches` whose pattern is not a literal) go through a small bounded cache.
 */

/**
 * The internal name CEL `matches` calls are renamed to before type checking: cel-js ships
 * `matches` on the backtracking RegExp engine, and its registry refuses a second overload of the
 * same signature, so cel.ts registers RE2's under this name.
 */
export const RE2_MATCHES = '__re2_matches';

const CACHE_LIMIT = 256;
const cache = new LRUCache<string, RE2JS>({ max: CACHE_LIMIT });

/**
 * The compiled pattern; throws an Error whose message says what is wrong with it.
 * @example compileRegex('^/api/v[0-9]+/').test('/api/v2/users') // true
 */
export function compileRegex(pattern: string): RE2JS {
  const hit = cache.get(pattern);
  if (hit) return hit;
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(pattern);
  } catch (err) {
    throw new Error(describeRegexError(err), { cause: err });
  }
  cache.set(pattern, compiled);
  return compiled;
}

/**
 * What is wrong with `pattern` as an RE2 expression, or undefined when it compiles.
 * @example regexProblem('(a') // 'missing closing ): `(a`'
 */
export function regexProblem(pattern: string): string | undefined {
  try {
    compileRegex(pattern);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

function describeRegexError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // re2js prefixes every syntax error with this; the rest names the problem and the fragment.
  return message.replace(/^error parsing regexp: /, '');
}

/**
 * Whether `pattern` matches anywhere in `text` (CEL `matches` semantics: an unanchored search;
 * anchor with `^` and `$`).
 * @example regexSearch('b+', 'abbbc') // true
 */
export function regexSearch(pattern: string, text: string): boolean {
  return compileRegex(pattern).test(text);
}
