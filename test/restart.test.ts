import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { CurlApi } from './support/curl.js';
import {
  createApiKey,
  E2E_SETTINGS,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';

/**
 * Stop a server with SIGTERM and start it again on the same data folder or database: every
 * resource, module and key must still be there, byte for byte.
 */
describe.each(DATABASE_KINDS)('restart with nothing lost (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer | undefined;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('keeps every resource, module and API key across a restart', async () => {
    server = await startBurrowServer(db);
    const key = await createApiKey(db);
    let api = new CurlApi(server.url, key);
    /** Create and return the reply; `addr` is set for reserved addresses. */
    const created = async (
      path: string,
      body: unknown,
    ): Promise<{ id: string; uri: string; addr?: string }> => {
      const res = await api.post(path, body);
      expect(res.status, `${path}: ${res.text}`).toBe(201);
      return res.body;
    };

    const bot = await created('/bot_users', { name: 'restart bot' });
    const credential = await created('/credentials', {
      description: 'agent token',
      acl: ['bind:*.restart.example.com'],
      owner_id: bot.id,
    });
    const domain = await created('/reserved_domains', { domain: '*.restart.example.com' });
    const addr = await created('/reserved_addrs', { description: 'kept' });
    const ipPolicy = await created('/ip_policies', { description: 'kept policy' });
    const ipRule = await created('/ip_policy_rules', {
      action: 'deny',
      cidr: '10.0.0.0/8',
      ip_policy_id: ipPolicy.id,
    });
    const backend = await created('/backends/tunnel_group', { labels: { app: 'kept' } });
    const tcpEdge = await created('/edges/tcp', {
      description: 'kept tcp edge',
      metadata: 'ünïcødé metadata',
      hostports: [addr.addr!],
      backend: { backend_id: backend.id },
      ip_restriction: { enabled: false, ip_policy_ids: [ipPolicy.id] },
      traffic_policy: { value: 'on_tcp_connect:\n  - actions: [{type: deny}]\n' },
    });
    const tlsEdge = await created('/edges/tls', {
      hostports: [`*.restart.example.com:${E2E_SETTINGS.httpsPort}`],
    });
    const put = await api.put(`/edges/tls/${tlsEdge.id}/traffic_policy`, {
      enabled: false,
      value: '{"inbound":[{"actions":[{"type":"deny"}]}],"outbound":[]}',
    });
    expect(put.status).toBe(200);

    const resources = [bot, credential, domain, addr, ipPolicy, ipRule, backend, tcpEdge, tlsEdge];
    const paths = resources.map((r) => new URL(r.uri).pathname);
    const before = await Promise.all(paths.map(async (p) => (await api.get(p)).body));
    const lists = [
      '/bot_users',
      '/credentials',
      '/reserved_domains',
      '/reserved_addrs',
      '/edges/tcp',
    ];
    const listsBefore = await Promise.all(lists.map(async (p) => (await api.get(p)).body));

    expect(await server.stop()).toBe(0);
    server = await startBurrowServer(db);
    api = new CurlApi(server.url, key);

    for (const [i, path] of paths.entries()) {
      const res = await api.get(path);
      expect(res.status, path).toBe(200);
      // uri fields name the new port; everything else must be identical.
      expect(res.body, path).toEqual(rebase(before[i], server.url));
    }
    for (const [i, path] of lists.entries()) {
      expect((await api.get(path)).body, path).toEqual(rebase(listsBefore[i], server.url));
    }
    expect((await api.get(`/edges/tls/${tlsEdge.id}/traffic_policy`)).body).toEqual(put.body);

    // The store keeps counting where it stopped: new ids sort after the old, new ports differ.
    const later = await api.post('/reserved_addrs', {});
    expect(later.status).toBe(201);
    expect(later.body.addr).not.toBe(addr.addr!);
    expect(later.body.id > addr.id).toBe(true);

    // A key exists, so the restarted server printed no "create an API key" hint.
    expect(await server.stop()).toBe(0);
    expect(server.stderr()).not.toContain('api-key create');
    expect(server.logs.some((l) => String(l.msg).includes('api-key create'))).toBe(false);
    expect(server.logs.some((l) => l.msg === 'API listening')).toBe(true);
  });
});

/** `value` with every `http://127.0.0.1:<port>` replaced by `baseUrl` (the port changes). */
function rebase(value: unknown, baseUrl: string): unknown {
  return JSON.parse(JSON.stringify(value).replace(/http:\/\/127\.0\.0\.1:\d+/g, baseUrl));
}
