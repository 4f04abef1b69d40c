import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { curl, CurlApi } from './support/curl.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';

/** Every collection of the API, and the module paths of edges. */
const COLLECTIONS = [
  '/api_keys',
  '/bot_users',
  '/credentials',
  '/reserved_domains',
  '/reserved_addrs',
  '/ip_policies',
  '/ip_policy_rules',
  '/certificate_authorities',
  '/backends/tunnel_group',
  '/edges/tcp',
  '/edges/tls',
];
const MODULE_PATHS = [
  '/edges/tcp/{id}/backend',
  '/edges/tcp/{id}/ip_restriction',
  '/edges/tcp/{id}/traffic_policy',
  '/edges/tls/{id}/backend',
  '/edges/tls/{id}/ip_restriction',
  '/edges/tls/{id}/mutual_tls',
  '/edges/tls/{id}/tls_termination',
  '/edges/tls/{id}/traffic_policy',
];

/**
 * The API's ground rules as a client on the wire sees them: version header, authentication, the
 * error body, paging links, and the OpenAPI description.
 */
describe.each(DATABASE_KINDS)('API basics over HTTP (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let key: string;
  let api: CurlApi;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    server = await startBurrowServer(db);
    key = await createApiKey(db);
    api = new CurlApi(server.url, key);
  });
  afterAll(async () => {
    expect(await server?.stop()).toBe(0);
    await db?.drop();
  });

  const withHeaders = (path: string, ...headers: string[]) =>
    curl([`${server.url}${path}`, ...headers.flatMap((h) => ['-H', h])]);

  it('requires the version header: missing 400 ERR_NGROK_218, another value 400 ERR_NGROK_217', async () => {
    const missing = await withHeaders('/bot_users', `Authorization: Bearer ${key}`);
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({
      error_code: 'ERR_NGROK_218',
      status_code: 400,
      msg: expect.stringContaining('Supported versions: 2'),
      details: { operation_id: expect.stringMatching(/^op_[0-9A-Za-z]{27}$/) },
    });
    expect(missing.headers['operation-id']).toBe(missing.body.details.operation_id);

    const wrong = await withHeaders(
      '/bot_users',
      `Authorization: Bearer ${key}`,
      'Service-Version: 3',
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body.error_code).toBe('ERR_NGROK_217');
    expect(wrong.body.msg).toContain("'3'");

    const alias = await withHeaders(
      '/bot_users',
      `Authorization: Bearer ${key}`,
      'Ngrok-Version: 2',
    );
    expect(alias.status).toBe(200);
  });

  it('requires an API key: missing 401 ERR_NGROK_200, wrong 401 ERR_NGROK_203', async () => {
    const missing = await withHeaders('/bot_users', 'Service-Version: 2');
    expect(missing.status).toBe(401);
    expect(missing.body).toMatchObject({ error_code: 'ERR_NGROK_200', status_code: 401 });
    expect(missing.body.msg).toContain('burrow api-key create');

    const wrong = await withHeaders(
      '/bot_users',
      'Service-Version: 2',
      `Authorization: Bearer ${key}x`,
    );
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ error_code: 'ERR_NGROK_203', status_code: 401 });
    // A key is never echoed back, whole or in part.
    expect(wrong.text).not.toContain(key.slice(0, 20));
  });

  it('answers unknown routes, unknown ids, bad JSON and unknown fields as documented', async () => {
    expect((await api.get('/no_such_things')).status).toBe(404);
    const unknownId = await api.get('/bot_users/bot_000000000000000000000000000');
    expect(unknownId.status).toBe(404);
    expect(unknownId.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });

    const malformed = await api.request('POST', '/bot_users', '{"name": ');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error_code).toBe('ERR_NGROK_213');

    const unknownField = await api.post('/bot_users', { name: 'x', nmae: 'y' });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.error_code).toBe('ERR_NGROK_214');
    expect(unknownField.body.msg).toContain('nmae');
  });

  it('pages newest first through absolute next_page_uri links', async () => {
    const names = ['page-a', 'page-b', 'page-c'];
    for (const name of names) expect((await api.post('/bot_users', { name })).status).toBe(201);
    const seen: string[] = [];
    let next: string | null = `${server.url}/bot_users?limit=1`;
    for (let pages = 0; next !== null; pages++) {
      expect(pages).toBeLessThan(10);
      expect(next.startsWith(`${server.url}/bot_users?`)).toBe(true);
      const page = await api.get(next.slice(server.url.length));
      expect(page.status).toBe(200);
      seen.push(...page.body.bot_users.map((b: { name: string }) => b.name));
      next = page.body.next_page_uri;
    }
    expect(seen.filter((n) => names.includes(n))).toEqual([...names].reverse());
  });

  it('serves an OpenAPI 3.1.0 description of every resource without a key', async () => {
    const res = await curl([`${server.url}/openapi.json`]);
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe('3.1.0');
    const paths = Object.keys(res.body.paths);
    for (const collection of COLLECTIONS) {
      expect(paths, collection).toContain(collection);
      expect(paths, `${collection}/{id}`).toContain(`${collection}/{id}`);
      expect(Object.keys(res.body.paths[collection]), collection).toEqual(
        expect.arrayContaining(['get', 'post']),
      );
    }
    for (const modulePath of MODULE_PATHS) {
      expect(paths, modulePath).toContain(modulePath);
      expect(Object.keys(res.body.paths[modulePath]), modulePath).toEqual(
        expect.arrayContaining(['put', 'get', 'delete']),
      );
    }
    // Internal routes stay out of the description.
    expect(paths).not.toContain('/openapi.json');
  });
});
