import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EdgeSpecSources } from '../registry/edge-specs.js';
import { createTestApi, type TestApi } from '../../../test/support/api.js';
import { edgeFixtures } from '../../../test/support/edge-fixtures.js';
import {
  startEchoServer,
  tcpExchange,
  type EchoServer,
} from '../../../test/support/edge-traffic.js';
import {
  fakeTunnel,
  freePort,
  startTestIngress,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { until } from '../../../test/support/mux.js';
import { recordingCalls } from '../../../test/support/recording.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { EdgeRoutes } from './edge-routes.js';

/** Poll until the change has reached the routes (5 s at most). */
const eventually = { timeout: 5000 };

/**
 * What the edge runtime read of edges from the store: full loads of every serving edge, and edges
 * read one by one (their ids).
 */
interface StoreReads {
  listServing: unknown[];
  get: unknown[];
}

/**
 * The repositories EdgeRoutes reads, recording its reads of edges: not a spy on the API's
 * repository, since the API reads edges too and only the edge runtime's reads count here.
 */
function countingSources(api: TestApi, reads: StoreReads): EdgeSpecSources {
  const { backends, ipPolicies, certificateAuthorities } = api.repos;
  const edges = recordingCalls(api.repos.edges, reads);
  return { edges, backends, ipPolicies, certificateAuthorities };
}

/**
 * Issue 35: the edge learns of a change by its event and reads only what the event names. An edge
 * created, changed and deleted through the API is served and refused on the ingress while the
 * other edges are never read again (no periodic reload here: the reconcile is off).
 */
describe.each(DATABASE_KINDS)('edge routes follow change events (%s)', (kind) => {
  let api: TestApi;
  let ingress: TestIngress;
  let routes: EdgeRoutes | undefined;
  let echo: EchoServer;
  const reads: StoreReads = { listServing: [], get: [] };

  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await api.call(method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    return res.body as { id: string };
  };
  const portOf = (addr: string) => Number(addr.slice(addr.lastIndexOf(':') + 1));
  const reserve = async () => (await edgeFixtures(api.store).reservedAddr(await freePort())).addr;
  const served = async (addr: string) => (await tcpExchange(portOf(addr))).text === 'echo:ping';
  const waitServed = (addr: string) =>
    until(() => ingress.ingress.tcp.ports.includes(portOf(addr))).then(async () => {
      await ingress.ingress.tcp.listening(portOf(addr));
      expect(await served(addr)).toBe(true);
    });
  const waitRefused = (addr: string) =>
    until(() => !ingress.ingress.tcp.ports.includes(portOf(addr)));

  beforeAll(async () => {
    api = await createTestApi(kind, {
      online: {
        tunnelsMatching: () => [],
        // As edge.ts wires it: a change to what edges read reloads the edges that read it.
        configChanged: (topic, inputs) => {
          if (topic === 'edges') void routes?.inputsChanged(inputs);
        },
      },
    });
    echo = await startEchoServer('echo');
    ingress = await startTestIngress();
  });
  afterAll(async () => {
    routes?.close();
    await ingress?.close();
    await echo?.close();
    await api?.close();
  });

  it('serves, changes and refuses one edge reading that edge alone', async () => {
    const backend = await ok('POST', '/backends/static', { address: `127.0.0.1:${echo.port}` });
    const others: string[] = [];
    for (let i = 0; i < 3; i++) {
      const addr = await reserve();
      others.push(addr);
      await ok('POST', '/edges/tcp', { hostports: [addr], backend: { backend_id: backend.id } });
    }
    routes = new EdgeRoutes({
      repos: countingSources(api, reads),
      registry: ingress.registry,
      syncIntervalMs: 0,
    });
    await routes.start();
    for (const addr of others) await waitServed(addr);
    expect(reads.listServing).toHaveLength(1);
    reads.listServing.length = 0;

    // Created: served at once, and only it was read.
    const first = await reserve();
    const edge = await ok('POST', '/edges/tcp', {
      hostports: [first],
      backend: { backend_id: backend.id },
    });
    await waitServed(first);

    // Changed: moves to another address.
    const moved = await reserve();
    await ok('PATCH', `/edges/tcp/${edge.id}`, { hostports: [moved] });
    await waitServed(moved);
    await waitRefused(first);

    // What it reads changed: a deny rule on its IP policy refuses it; the other edges, which do
    // not use that policy, are not read.
    const policy = await ok('POST', '/ip_policies', { description: 'nobody' });
    await ok('PUT', `/edges/tcp/${edge.id}/ip_restriction`, { ip_policy_ids: [policy.id] });
    const readsBefore = reads.get.length;
    await ok('POST', '/ip_policy_rules', {
      ip_policy_id: policy.id,
      cidr: '127.0.0.0/8',
      action: 'deny',
    });
    await until(() => reads.get.length > readsBefore);
    await expect
      .poll(() => tcpExchange(portOf(moved)), eventually)
      .toMatchObject({ served: false });

    // Deleted: refused.
    await ok('DELETE', `/edges/tcp/${edge.id}/ip_restriction`);
    await ok('DELETE', `/edges/tcp/${edge.id}`);
    await waitRefused(moved);

    // Every read since start named this edge; the others were never read again, and still serve.
    expect(reads.listServing).toHaveLength(0);
    expect(reads.get.length).toBeGreaterThanOrEqual(5);
    expect(new Set(reads.get)).toEqual(new Set([edge.id]));
    for (const addr of others) expect(await served(addr)).toBe(true);
  });
  it("takes a hostport an agent held as soon as the agent's tunnel goes, reading nothing", async () => {
    const backend = await ok('POST', '/backends/static', { address: `127.0.0.1:${echo.port}` });
    const addr = await reserve();
    const other = await startEchoServer('agent');
    const agent = fakeTunnel({ proto: 'tcp', port: portOf(addr), upstreamPort: other.port });
    ingress.registry.addTunnel(agent);
    try {
      await ingress.ingress.tcp.listening(portOf(addr));
      const edge = await ok('POST', '/edges/tcp', {
        hostports: [addr],
        backend: { backend_id: backend.id },
      });
      await until(() => reads.get.includes(edge.id));
      await expect
        .poll(() => tcpExchange(portOf(addr)), eventually)
        .toMatchObject({ text: 'agent:ping' });
      const readsBefore = { serving: reads.listServing.length, edges: reads.get.length };

      // No reload runs here (the reconcile is off): the edge's route, kept while blocked, goes in.
      ingress.registry.removeTunnel(agent.id);
      await until(() => ingress.registry.byPort(portOf(addr))?.edge?.id === edge.id);
      await expect.poll(() => served(addr), eventually).toBe(true);
      expect({ serving: reads.listServing.length, edges: reads.get.length }).toEqual(readsBefore);
      await ok('DELETE', `/edges/tcp/${edge.id}`);
      await waitRefused(addr);
    } finally {
      if (ingress.registry.tunnel(agent.id)) ingress.registry.removeTunnel(agent.id);
      await other.close();
    }
  });
});
