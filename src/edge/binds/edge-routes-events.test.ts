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
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { EdgeRoutes } from './edge-routes.js';

/** Poll `check` until it holds (5 s at most). */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in 5 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** What the edge runtime read from the store, through the repositories it was given. */
interface StoreReads {
  /** Full loads of every serving edge. */
  serving: number;
  /** Edges read one by one, by id. */
  edges: string[];
}

/**
 * The repositories EdgeRoutes reads, counting its reads of edges. A Proxy rather than a spy on
 * the API's repository: the API reads edges too, and only the edge runtime's reads count here.
 */
function countingSources(api: TestApi, reads: StoreReads): EdgeSpecSources {
  const edges = api.repos.edges;
  const counted = new Proxy(edges, {
    get(target, prop, receiver) {
      if (prop === 'listServing') {
        return () => {
          reads.serving++;
          return target.listServing();
        };
      }
      if (prop === 'get') {
        return (id: string) => {
          reads.edges.push(id);
          return target.get(id);
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
    },
  });
  const { backends, ipPolicies, certificateAuthorities } = api.repos;
  return { edges: counted, backends, ipPolicies, certificateAuthorities };
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
  const reads: StoreReads = { serving: 0, edges: [] };

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
    expect(reads.serving).toBe(1);
    reads.serving = 0;

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
    const readsBefore = reads.edges.length;
    await ok('POST', '/ip_policy_rules', {
      ip_policy_id: policy.id,
      cidr: '127.0.0.0/8',
      action: 'deny',
    });
    await until(() => reads.edges.length > readsBefore);
    await eventually(async () => !(await tcpExchange(portOf(moved))).served);

    // Deleted: refused.
    await ok('DELETE', `/edges/tcp/${edge.id}/ip_restriction`);
    await ok('DELETE', `/edges/tcp/${edge.id}`);
    await waitRefused(moved);

    // Every read since start named this edge; the others were never read again, and still serve.
    expect(reads.serving).toBe(0);
    expect(reads.edges.length).toBeGreaterThanOrEqual(5);
    expect(new Set(reads.edges)).toEqual(new Set([edge.id]));
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
      await until(() => reads.edges.includes(edge.id));
      await eventually(async () => (await tcpExchange(portOf(addr))).text === 'agent:ping');
      const readsBefore = { serving: reads.serving, edges: reads.edges.length };

      // No reload runs here (the reconcile is off): the edge's route, kept while blocked, goes in.
      ingress.registry.removeTunnel(agent.id);
      await until(() => ingress.registry.byPort(portOf(addr))?.edge?.id === edge.id);
      await eventually(async () => served(addr));
      expect({ serving: reads.serving, edges: reads.edges.length }).toEqual(readsBefore);
      await ok('DELETE', `/edges/tcp/${edge.id}`);
      await waitRefused(addr);
    } finally {
      if (ingress.registry.tunnel(agent.id)) ingress.registry.removeTunnel(agent.id);
      await other.close();
    }
  });
});
