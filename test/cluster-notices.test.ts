import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CurlApi } from './support/curl.js';
import { hostGet } from './support/edge-listeners.js';
import { tcpExchange } from './support/edge-traffic.js';
import type { LocalServer } from './support/ingress.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { startEchoUpstream } from './support/tcp-upstreams.js';

/**
 * Issue 35: a node learns of another node's changes by PostgreSQL notices alone. The edge node
 * runs with `--store-reconcile-ms 0` (no periodic reload at all), so everything it serves after
 * its start arrived as a notice naming what changed: an edge created, its IP policy's rules
 * changed, the edge deleted, a cloud endpoint created and deleted, all through the API node.
 */

/** Poll until the change has reached the edge node (5 s at most). */
const eventually = { timeout: 5000 };
/** What TCP `port` of the edge node answers, or how it refused. */
const exchange = (port: number) => expect.poll(async () => tcpExchange(port), eventually);
/** The body HTTP `port` of the edge node answers for `host`, '' when nothing answered. */
const bodyFor = (port: number, host: string) =>
  expect.poll(
    async () => (await hostGet(port, host, '/').catch(() => undefined))?.body ?? '',
    eventually,
  );

describe('a node follows another node by notices, with no periodic reload (postgres)', () => {
  let db: TestDatabase;
  let apiNode: BurrowServer;
  let edgeNode: BurrowServer;
  let client: CurlApi;
  let echo: LocalServer;
  const httpPort = { value: 0 };

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const dir = (name: string) => {
      const path = join(db.dataDir, name);
      mkdirSync(path, { recursive: true });
      return { dataDir: path, database: db.database };
    };
    apiNode = await startBurrowServer(dir('api'), { args: ['--node-id', 'api-1'] });
    httpPort.value = await freePort();
    edgeNode = await startBurrowServer(dir('edge'), {
      readyMessage: 'cluster node joined',
      args: [
        ...['--role', 'edge', '--node-id', 'edge-1', '--store-reconcile-ms', '0'],
        ...['--agent-listen', `127.0.0.1:${await freePort()}`],
        ...['--http-listen', `127.0.0.1:${httpPort.value}`],
        ...['--https-listen', `127.0.0.1:${await freePort()}`],
      ],
    });
    client = new CurlApi(apiNode.url, await createApiKey(dir('api')));
    echo = await startEchoUpstream();
  }, 90_000);

  afterAll(async () => {
    await echo?.close();
    for (const s of [edgeNode, apiNode]) await s?.stop(20_000);
    await db?.drop();
  });

  it('serves, changes and refuses a TCP edge made through the API node', async () => {
    const addr = (await client.post('/reserved_addrs', { description: 'notices' })).body
      .addr as string;
    const port = Number(addr.slice(addr.lastIndexOf(':') + 1));
    const backend = (await client.post('/backends/static', { address: `127.0.0.1:${echo.port}` }))
      .body as { id: string };
    const edge = await client.post('/edges/tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
    });
    expect(edge.status, edge.text).toBe(201);
    await exchange(port).toMatchObject({ text: 'ping' });

    // A rule of its IP policy: the notice names the policy, the edge node reloads this edge.
    const policy = (await client.post('/ip_policies', { description: 'none' })).body as {
      id: string;
    };
    const put = await client.put(`/edges/tcp/${edge.body.id}/ip_restriction`, {
      ip_policy_ids: [policy.id],
    });
    expect(put.status, put.text).toBe(200);
    const deny = { ip_policy_id: policy.id, cidr: '127.0.0.0/8', action: 'deny' };
    expect((await client.post('/ip_policy_rules', deny)).status).toBe(201);
    await exchange(port).toMatchObject({ served: false });

    expect((await client.delete(`/edges/tcp/${edge.body.id}`)).status).toBe(204);
    await exchange(port).toMatchObject({ error: 'ECONNREFUSED' });
  });

  it('serves and forgets a cloud endpoint made through the API node', async () => {
    const policy = JSON.stringify({
      on_http_request: [
        { actions: [{ type: 'custom-response', config: { status_code: 200, body: 'cloud' } }] },
      ],
    });
    const made = await client.post('/endpoints', {
      url: 'https://notices.burrow.test',
      traffic_policy: policy,
    });
    expect(made.status, made.text).toBe(201);
    await bodyFor(httpPort.value, 'notices.burrow.test').toBe('cloud');
    expect((await client.delete(`/endpoints/${made.body.id}`)).status).toBe(204);
    await bodyFor(httpPort.value, 'notices.burrow.test').not.toBe('cloud');
  });
});
