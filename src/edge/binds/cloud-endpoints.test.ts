import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../../test/support/api.js';
import { httpRequest, startTestIngress, type TestIngress } from '../../../test/support/ingress.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { CloudEndpoints, type CloudEndpointsOptions } from './cloud-endpoints.js';

/** Poll `check` until it holds (5 s at most). */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in 5 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A policy that answers `body` to every request. */
const answering = (body: string): string =>
  JSON.stringify({
    on_http_request: [
      { actions: [{ type: 'custom-response', config: { status_code: 200, body } }] },
    ],
  });

/**
 * Issue 35: cloud endpoints follow change events too. One created, changed and deleted through the
 * API answers and stops answering on the ingress, and the edge reads only that endpoint (the
 * others are never listed again; the reconcile is off).
 */
describe.each(DATABASE_KINDS)('cloud endpoints follow change events (%s)', (kind) => {
  let api: TestApi;
  let ingress: TestIngress;
  let cloud: CloudEndpoints | undefined;
  const reads = { all: 0, byId: [] as string[] };

  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await api.call(method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    return res.body as { id: string };
  };
  const answer = async (host: string) => (await httpRequest(ingress.httpPort, { host })).body;

  beforeAll(async () => {
    api = await createTestApi(kind);
    ingress = await startTestIngress();
  });
  afterAll(async () => {
    cloud?.close();
    await ingress?.close();
    await api?.close();
  });

  it('serves, changes and forgets one endpoint reading that endpoint alone', async () => {
    const stored = api.repos.cloudEndpoints;
    const counted = new Proxy(stored, {
      get(target, prop, receiver) {
        if (prop === 'all') {
          return () => {
            reads.all++;
            return target.all();
          };
        }
        if (prop === 'get') {
          return (id: string) => {
            reads.byId.push(id);
            return target.get(id);
          };
        }
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    await ok('POST', '/endpoints', {
      url: 'https://other.burrow.test',
      traffic_policy: answering('other'),
    });
    const repos: CloudEndpointsOptions['repos'] = {
      cloudEndpoints: counted,
      ipPolicies: api.repos.ipPolicies,
    };
    cloud = new CloudEndpoints({
      repos,
      registry: ingress.registry,
      publicUrl: (proto, where) => `${proto}://${String(where)}`,
      syncIntervalMs: 0,
    });
    await cloud.start();
    expect(await answer('other.burrow.test')).toBe('other');
    expect(reads.all).toBe(1);

    const made = await ok('POST', '/endpoints', {
      url: 'https://one.burrow.test',
      traffic_policy: answering('first'),
    });
    await eventually(async () => (await answer('one.burrow.test')) === 'first');
    await ok('PATCH', `/endpoints/${made.id}`, { traffic_policy: answering('second') });
    await eventually(async () => (await answer('one.burrow.test')) === 'second');
    await ok('DELETE', `/endpoints/${made.id}`);
    await eventually(async () => ingress.registry.byHost('one.burrow.test') === undefined);

    expect(reads.all).toBe(1);
    expect(new Set(reads.byId)).toEqual(new Set([made.id]));
    expect(await answer('other.burrow.test')).toBe('other');
  });
});
