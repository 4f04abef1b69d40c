/**
 * `target` as it is, except that every call of a method named in `seen` is recorded there (its
 * first argument) before it runs: what one piece of code reads through a repository it was given,
 * while other users of the same repository (the API under test) go uncounted.
 * @example
 * const seen = { listServing: [] as unknown[], get: [] as unknown[] };
 * const edges = recordingCalls(api.repos.edges, seen); // … expect(seen.get).toEqual([edgeId]);
 */
export function recordingCalls<T extends object>(
  target: T,
  seen: Partial<Record<keyof T, unknown[]>>,
): T {
  return new Proxy(target, {
    get(object, prop, receiver) {
      const value: unknown = Reflect.get(object, prop, receiver);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      const calls = (seen as Partial<Record<PropertyKey, unknown[]>>)[prop];
      if (!calls) return method.bind(object);
      return (...args: unknown[]) => {
        calls.push(args[0]);
        return method.apply(object, args);
      };
    },
  });
}
