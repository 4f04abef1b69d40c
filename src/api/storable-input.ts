import type { FastifyInstance } from 'fastify';
import { CODES, ValidationError } from '../core/errors.js';
import { storableProblem } from '../core/text-rules.js';
import { fieldPath } from './error-handler.js';
import { pathOf, type Reached } from './json-depth.js';

/** A value met on the walk. */
interface Visit extends Reached {
  value: unknown;
}

/**
 * The first string in `root` (keys included) that cannot be stored, as the field path and the rule
 * it breaks. Iterative, not recursive: a field typed unknown can hold arrays nested a million
 * deep, which would overflow the call stack.
 */
function findUnstorable(root: unknown): { field: string; problem: string } | undefined {
  const stack: Visit[] = [{ value: root, key: undefined, parent: undefined }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { value } = visit;
    if (typeof value === 'string') {
      const problem = storableProblem(value);
      if (problem !== undefined) return { field: fieldPath(pathOf(visit)), problem };
    } else if (Array.isArray(value)) {
      // Pushed last to first, so that the first offending item is the one reported.
      for (let i = value.length - 1; i >= 0; i--)
        stack.push({ value: value[i], key: i, parent: visit });
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>);
      for (const [key] of entries) {
        const problem = storableProblem(key);
        if (problem !== undefined)
          return { field: fieldPath([...pathOf(visit), key]), problem: `its name ${problem}` };
      }
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i]!;
        stack.push({ value: item, key, parent: visit });
      }
    }
  }
  return undefined;
}

/**
 * Refuse, with 400 ERR_NGROK_215 naming the field, any path parameter, query parameter or body
 * string that holds NUL or an unpaired surrogate. PostgreSQL rejects NUL in text (so the query
 * failed with a 500) and replaces unpaired surrogates, while SQLite keeps both: refusing them here,
 * after schema validation has had its say, makes every field behave the same on both databases.
 */
export function refuseUnstorableStrings(app: FastifyInstance): void {
  app.addHook('preHandler', async (request) => {
    const found =
      findUnstorable(request.params) ??
      findUnstorable(request.query) ??
      findUnstorable(request.body);
    if (found) {
      throw new ValidationError(CODES.invalidValue, found.field || 'body', found.problem);
    }
  });
}
