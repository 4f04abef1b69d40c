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
 * The request and reply samples of docs/api/*.md, sent with curl to a real `burrow server`: a
 * reserved wildcard domain, a bot user, and a TCP edge built from a reserved address, a
 * tunnel-group backend and an IP policy, through its whole life; then the traffic policy module of
 * a TLS edge on the reserved domain.
 */

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;
const idOf = (prefix: string) => new RegExp(`^${prefix}_[0-9A-Za-z]{27}$`);

/** A TCP sample policy in the older form (docs/traffic-policy.md): deny one client IP. */
const TCP_POLICY = JSON.stringify({
  inbound: [
    {
      name: 'Block IP',
      expressions: ['conn.ClientIP == "192.0.2.0"'],
      actions: [{ type: 'deny' }],
    },
  ],
  outbound: [],
});

/** TLS edge sample (docs/api/edges.md): log, then deny, connections whose TLS version has 1.3. */
const TLS_POLICY = JSON.stringify({
  inbound: [
    {
      name: 'AllowTLS1.3',
      expressions: ['conn.TLS.Version.contains("1.3")'],
      actions: [
        { type: 'log', config: { metadata: { message: 'Invalid TLS Version', edgeId: 'edge' } } },
        { type: 'deny' },
      ],
    },
  ],
  outbound: [],
});

describe.each(DATABASE_KINDS)('management API flows with curl (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  const uri = (path: string) => `${server.url}${path}`;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    server = await startBurrowServer(db);
    api = new CurlApi(server.url, await createApiKey(db));
  });
  afterAll(async () => {
    expect(await server?.stop()).toBe(0);
    await db?.drop();
  });

  it('reserves a wildcard domain: 201 with both DNS targets', async () => {
    const res = await api.post('/reserved_domains', {
      domain: '*.sitea.example.com',
      region: 'us',
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(idOf('rd')),
      created_at: expect.stringMatching(RFC3339),
      domain: '*.sitea.example.com',
      region: '',
      cname_target: expect.stringMatching(/\.burrow\.test$/),
      acme_challenge_cname_target: expect.stringMatching(/\.burrow\.test$/),
      http_endpoint_configuration: null,
      https_endpoint_configuration: null,
      certificate: null,
      certificate_management_policy: {
        authority: expect.any(String),
        private_key_type: expect.any(String),
      },
      certificate_management_status: { renews_at: null, provisioning_job: expect.any(Object) },
    });
    expect(res.body.uri).toBe(uri(`/reserved_domains/${res.body.id}`));
    expect(res.body.cname_target).not.toBe(res.body.acme_challenge_cname_target);
  });

  it('creates a bot user: 201, active true', async () => {
    const res = await api.post('/bot_users', { name: 'new bot user from API' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(idOf('bot')),
      uri: uri(`/bot_users/${res.body.id}`),
      name: 'new bot user from API',
      active: true,
      created_at: expect.stringMatching(RFC3339),
    });
    expect((await api.get(`/bot_users/${res.body.id}`)).body).toEqual(res.body);
  });

  it('runs a TCP edge through create, get, list, update and delete', async () => {
    const addr = await api.post('/reserved_addrs', { description: 'edge address', region: 'us' });
    expect(addr.status).toBe(201);
    expect(addr.body.addr).toMatch(
      new RegExp(`^${E2E_SETTINGS.tcpHost.replace(/\./g, '\\.')}:20\\d{3}$`),
    );

    const backend = await api.post('/backends/tunnel_group', {
      description: 'acme tunnel group',
      labels: { app: 'acme', dc: 'east' },
    });
    expect(backend.status).toBe(201);
    expect(backend.body).toMatchObject({
      id: expect.stringMatching(idOf('bkdtg')),
      labels: { app: 'acme', dc: 'east' },
      tunnels: [],
    });

    const policy = await api.post('/ip_policies', { description: 'office' });
    expect(policy.status).toBe(201);
    expect(policy.body.id).toMatch(idOf('ipp'));
    const rule = await api.post('/ip_policy_rules', {
      action: 'allow',
      cidr: '212.3.14.0/24',
      description: 'nyc office',
      ip_policy_id: policy.body.id,
    });
    expect(rule.status).toBe(201);
    expect(rule.body).toMatchObject({
      id: expect.stringMatching(idOf('ipr')),
      action: 'allow',
      cidr: '212.3.14.0/24',
      ip_policy: { id: policy.body.id, uri: uri(`/ip_policies/${policy.body.id}`) },
    });

    const metadata = '{"environment": "staging"}';
    const created = await api.post('/edges/tcp', {
      description: 'acme tcp edge',
      metadata,
      hostports: [addr.body.addr],
      backend: { enabled: true, backend_id: backend.body.id },
      ip_restriction: { ip_policy_ids: [policy.body.id] },
      traffic_policy: { enabled: true, value: TCP_POLICY },
    });
    expect(created.status).toBe(201);
    const edge = created.body;
    expect(edge).toEqual({
      id: expect.stringMatching(idOf('edgtcp')),
      uri: uri(`/edges/tcp/${edge.id}`),
      description: 'acme tcp edge',
      metadata,
      created_at: expect.stringMatching(RFC3339),
      hostports: [addr.body.addr],
      backend: {
        enabled: true,
        backend: { id: backend.body.id, uri: uri(`/backends/tunnel_group/${backend.body.id}`) },
      },
      ip_restriction: {
        enabled: true,
        ip_policies: [{ id: policy.body.id, uri: uri(`/ip_policies/${policy.body.id}`) }],
      },
      traffic_policy: { enabled: true, value: TCP_POLICY },
      policy: null,
    });

    const got = await api.get(`/edges/tcp/${edge.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(edge);

    const list = await api.get('/edges/tcp');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ tcp_edges: [edge], uri: uri('/edges/tcp'), next_page_uri: null });

    // The address and the backend are in use: deleting them is refused, naming the edge.
    const addrDelete = await api.delete(`/reserved_addrs/${addr.body.id}`);
    expect(addrDelete.status).toBe(409);
    expect(addrDelete.body.msg).toContain(edge.id);
    const backendDelete = await api.delete(`/backends/tunnel_group/${backend.body.id}`);
    expect(backendDelete.status).toBe(409);
    expect(backendDelete.body.msg).toContain(edge.id);

    // Update: fields sent change, modules given replace theirs whole, the rest stays.
    const disabledPolicy = { enabled: false, value: TCP_POLICY };
    const patched = await api.patch(`/edges/tcp/${edge.id}`, {
      description: 'acme tcp edge, updated',
      traffic_policy: disabledPolicy,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      ...edge,
      description: 'acme tcp edge, updated',
      traffic_policy: disabledPolicy,
    });
    const empty = await api.patch(`/edges/tcp/${edge.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(patched.body);
    expect((await api.get(`/edges/tcp/${edge.id}`)).body).toEqual(patched.body);

    const deleted = await api.delete(`/edges/tcp/${edge.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    const gone = await api.get(`/edges/tcp/${edge.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });
    expect((await api.get('/edges/tcp')).body.tcp_edges).toEqual([]);

    // Nothing refers to them any more.
    expect((await api.delete(`/reserved_addrs/${addr.body.id}`)).status).toBe(204);
    expect((await api.delete(`/backends/tunnel_group/${backend.body.id}`)).status).toBe(204);
  });

  it('refuses a TCP edge whose traffic policy cannot be parsed, naming the rule', async () => {
    const res = await api.post('/edges/tcp', {
      traffic_policy: { value: '{"on_tcp_connect": [{"name": "Block", "actions": []}]}' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error_code).toBe('ERR_NGROK_2206');
    expect(res.body.msg).toContain('on_tcp_connect[0] ("Block"): actions must be a non-empty list');
    expect((await api.get('/edges/tcp')).body.tcp_edges).toEqual([]);
  });

  it('replaces, gets and deletes the traffic policy module of a TLS edge', async () => {
    const domains = await api.get('/reserved_domains');
    const wildcard = domains.body.reserved_domains.find(
      (d: { domain: string }) => d.domain === '*.sitea.example.com',
    );
    expect(wildcard).toBeDefined();
    const hostport = `*.sitea.example.com:${E2E_SETTINGS.httpsPort}`;
    const created = await api.post('/edges/tls', {
      description: 'acme tls edge',
      hostports: [hostport],
    });
    expect(created.status).toBe(201);
    const edge = created.body;
    expect(edge).toMatchObject({
      id: expect.stringMatching(idOf('edgtls')),
      uri: uri(`/edges/tls/${edge.id}`),
      hostports: [hostport],
      backend: null,
      ip_restriction: null,
      mutual_tls: null,
      tls_termination: null,
      traffic_policy: null,
      policy: null,
    });
    const path = `/edges/tls/${edge.id}/traffic_policy`;

    const put = await api.put(path, { enabled: true, value: TLS_POLICY });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ enabled: true, value: TLS_POLICY });
    const get = await api.get(path);
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ enabled: true, value: TLS_POLICY });
    expect((await api.get(`/edges/tls/${edge.id}`)).body.traffic_policy).toEqual(put.body);

    // A YAML document in the phase form replaces it whole; enabled defaults to true.
    const yaml =
      'on_tcp_connect:\n  - name: Block IP\n    expressions: ["conn.client_ip == \'192.0.2.0\'"]\n    actions:\n      - type: deny\n';
    const replaced = await api.put(path, { value: yaml });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toEqual({ enabled: true, value: yaml });

    const bad = await api.put(path, { value: 'inbound:\n  - name: x\n    actions: [\n' });
    expect(bad.status).toBe(400);
    expect(bad.body.error_code).toBe('ERR_NGROK_2236');
    expect(bad.body.msg).toMatch(/line \d+, column \d+/);
    expect((await api.get(path)).body).toEqual(replaced.body);

    // The domain is in use by the edge.
    const domainDelete = await api.delete(`/reserved_domains/${wildcard.id}`);
    expect(domainDelete.status).toBe(409);
    expect(domainDelete.body.msg).toContain(edge.id);

    const del = await api.delete(path);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await api.get(path)).status).toBe(404);
    expect((await api.delete(path)).status).toBe(204);
    expect((await api.get(`/edges/tls/${edge.id}`)).body.traffic_policy).toBeNull();

    expect((await api.delete(`/edges/tls/${edge.id}`)).status).toBe(204);
    expect((await api.put(path, { value: TLS_POLICY })).status).toBe(404);
  });
});
