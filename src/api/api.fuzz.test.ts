import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { fuzzRuns, reportFuzz } from '../../test/support/fuzz.js';

/**
 * Fuzzing the management API from its own OpenAPI document: for every operation with a JSON
 * body, bodies generated from the schema (valid), and the same mutated (a field of the wrong
 * type, an unknown field, a value from anywhere). Never a 5xx; a refused request stores nothing.
 */

/** A JSON Schema, as @fastify/swagger emits it (only the keywords the generator reads). */
interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
}

interface Operation {
  method: 'POST' | 'PATCH' | 'PUT';
  path: string;
  body: Schema;
}

/** Values a schema accepts (or nearly: patterns and formats are left to chance). */
function arbitraryOf(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const options = schema.anyOf ?? schema.oneOf;
  if (options) return fc.oneof(...options.map((s) => arbitraryOf(s, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return fc.oneof(
        fc.string({ maxLength: Math.min(schema.maxLength ?? 40, 300) }),
        fc.domain(),
        fc.ipV4().map((ip) => `${ip}/32`),
        fc.constantFrom('*.example.com', 'bind:*', 'localhost:20001', '{}', 'on_http_request: []'),
      );
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -10, max: schema.maximum ?? 100_000 });
    case 'number':
      return fc.double({ noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return depth > 3
        ? fc.constant([])
        : fc.array(arbitraryOf(schema.items ?? {}, depth + 1), {
            maxLength: Math.min(schema.maxItems ?? 3, 3),
          });
    case 'object': {
      if (depth > 3) return fc.constant({});
      const props = schema.properties ?? {};
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, s] of Object.entries(props)) record[k] = arbitraryOf(s, depth + 1);
      return fc.record(record, { requiredKeys: schema.required ?? [] });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A body, then maybe broken: a field of the wrong type, an unknown field, or anything. */
function bodyOf(schema: Schema): fc.Arbitrary<unknown> {
  const valid = arbitraryOf(schema);
  return fc.oneof(
    { weight: 3, arbitrary: valid },
    {
      weight: 2,
      arbitrary: fc
        .tuple(valid, fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }))
        .map(([body, key, value]) => {
          if (typeof body !== 'object' || body === null || Array.isArray(body)) return value;
          const keys = Object.keys(body);
          const target =
            keys.length > 0 && key.length % 2 === 0 ? keys[key.length % keys.length]! : key;
          return { ...body, [target]: value };
        }),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
    { weight: 1, arbitrary: fc.string().map((text) => ({ raw: text })) },
  );
}

describe('fuzz: the API from its OpenAPI document', () => {
  let api: TestApi;
  let operations: Operation[];
  const ids: string[] = ['x', 'cr_0000000000000000000000000000', '%00', '..'];

  /** Rows in every table of the store, in one query. */
  async function rowCount(): Promise<number> {
    const tables = await api.store.db.introspection.getTables();
    const names = tables.map((t) => t.name).filter((n) => !n.startsWith('kysely_'));
    const total = sql.join(
      names.map((n) => sql`(SELECT count(*) FROM ${sql.table(n)})`),
      sql` + `,
    );
    const row = await sql<{ n: number }>`SELECT ${total} AS n`.execute(api.store.db);
    return Number(row.rows[0]!.n);
  }

  beforeAll(async () => {
    api = await createTestApi('sqlite');
    const doc = (await api.app.inject({ url: '/openapi.json' })).json<{
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>
      >;
    }>();
    operations = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const schema = op.requestBody?.content['application/json']?.schema;
        if (schema)
          operations.push({
            method: method.toUpperCase() as Operation['method'],
            path,
            body: schema,
          });
      }
    }
    expect(operations.length).toBeGreaterThan(20);
  });
  afterAll(async () => api?.close());

  it('answers every generated request below 500, and a refused one stores nothing', async () => {
    const runs = fuzzRuns(1500, 50_000);
    const statuses = new Map<number, number>();
    const request = fc
      .constantFrom(...operations)
      .chain((op) => fc.tuple(fc.constant(op), bodyOf(op.body), fc.nat()));
    await fc.assert(
      fc.asyncProperty(request, async ([op, body, pick]) => {
        const path = op.path.replace('{id}', encodeURIComponent(ids[pick % ids.length]!));
        const before = await rowCount();
        const res = await api.call(op.method, path, body);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        expect(
          res.status,
          `${op.method} ${path} ${JSON.stringify(body)} → ${JSON.stringify(res.body)}`,
        ).toBeLessThan(500);
        if (res.status >= 400) {
          expect(await rowCount(), `${op.method} ${path} refused but stored`).toBe(before);
        } else if (typeof res.body?.id === 'string') {
          ids.push(res.body.id as string);
        }
      }),
      { numRuns: runs },
    );
    // Valid bodies must get through sometimes, or the fuzzer only tests the validator.
    expect([...statuses.keys()].some((s) => s < 300)).toBe(true);
    reportFuzz('management API bodies from /openapi.json (src/api)', runs);
  }, 600_000);
});
