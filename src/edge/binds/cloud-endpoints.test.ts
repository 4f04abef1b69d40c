import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../../test/support/api.js';
import { httpRequest, startTestIngress, type TestIngress } from '../../../test/support/ingress.js';
import { recordingCalls } from '../../../test/support/recording.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { CloudEndpoints, type CloudEndpointsOptions } from './cloud-endpoints.js';

/** Poll until the change has reached the routes (5 s at most). */
const eventually = { timeout: 5000 };

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
  /** What the edge runtime read: full lists, and endpoints by id. */
  const reads = { all: [] as unknown[], get: [] as unknown[] };

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
    const counted = recordingCalls(api.repos.cloudEndpoints, reads);
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
    expect(reads.all).toHaveLength(1);

    const made = await ok('POST', '/endpoints', {
      url: 'https://one.burrow.test',
      traffic_policy: answering('first'),
    });
    await expect.poll(() => answer('one.burrow.test'), eventually).toBe('first');
    await ok('PATCH', `/endpoints/${made.id}`, { traffic_policy: answering('second') });
    await expect.poll(() => answer('one.burrow.test'), eventually).toBe('second');
    await ok('DELETE', `/endpoints/${made.id}`);
    await expect.poll(() => ingress.registry.byHost('one.burrow.test'), eventually).toBeUndefined();

    expect(reads.all).toHaveLength(1);
    expect(new Set(reads.get)).toEqual(new Set([made.id]));
    expect(await answer('other.burrow.test')).toBe('other');
  });
});
