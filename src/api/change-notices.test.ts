import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';

/**
 * The API tells the edges (and, in a cluster, every node) about a change at once: which calls
 * announce what, and that failed calls and reads announce nothing.
 */
describe('change notices', () => {
  let api: TestApi;
  const heard: string[] = [];

  beforeAll(async () => {
    api = await createTestApi('sqlite', {
      online: {
        tunnelsMatching: () => [],
        credentialsChanged: () => heard.push('credentials'),
        configChanged: (topic, inputs) =>
          heard.push(inputs === undefined ? topic : `${topic} [${inputs.join(',')}]`),
      },
    });
  });
  afterAll(async () => api.close());

  async function heardAfter(method: string, path: string, body?: unknown): Promise<string[]> {
    heard.length = 0;
    const res = await api.call(method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    return [...heard];
  }

  it('announces what edges read (IP policies and rules, backends) as edges, naming it', async () => {
    // A new IP policy or backend: no edge reads it yet, so there is nothing to announce.
    heard.length = 0;
    const policy = await api.call('POST', '/ip_policies', { description: 'office' });
    expect(policy.status).toBe(201);
    const backend = await api.call('POST', '/backends/static', { address: '127.0.0.1:9' });
    expect(backend.status).toBe(201);
    expect(heard).toEqual([]);

    const rule = await api.call('POST', '/ip_policy_rules', {
      cidr: '10.0.0.0/8',
      ip_policy_id: policy.body.id,
      action: 'allow',
    });
    expect(rule.status).toBe(201);
    expect(heard).toEqual([`edges [${policy.body.id}]`]);
    expect(
      await heardAfter('PATCH', `/ip_policies/${policy.body.id}`, { description: 'x' }),
    ).toEqual([`edges [${policy.body.id}]`]);
    expect(
      await heardAfter('PATCH', `/backends/static/${backend.body.id}`, { description: 'x' }),
    ).toEqual([`edges [${backend.body.id}]`]);
    // A rule's path names the rule, not its policy: every edge reloads.
    expect(
      await heardAfter('PATCH', `/ip_policy_rules/${rule.body.id}`, { description: 'y' }),
    ).toEqual(['edges']);
  });

  it('announces reserved domains as certificates, and credential deletions as credentials', async () => {
    expect(await heardAfter('POST', '/reserved_domains', { domain: 'notice.example.com' })).toEqual(
      ['certificates'],
    );
    const credential = await api.call('POST', '/credentials', {});
    expect(credential.status).toBe(201);
    expect(await heardAfter('DELETE', `/credentials/${credential.body.id}`)).toEqual([
      'credentials',
    ]);
  });

  it('announces event destinations and subscriptions as events', async () => {
    const file = { target: { file: { path: '/tmp/burrow-notice.jsonl' } } };
    expect(await heardAfter('POST', '/event_destinations', file)).toEqual(['events']);
    const sub = await api.call('POST', '/event_subscriptions', {});
    expect(sub.status).toBe(201);
    expect(
      await heardAfter('PATCH', `/event_subscriptions/${sub.body.id}`, { description: 'x' }),
    ).toEqual(['events']);
    expect(await heardAfter('GET', '/event_subscriptions')).toEqual([]);
  });

  it('announces nothing for reads and refused changes', async () => {
    expect(await heardAfter('GET', '/ip_policies')).toEqual([]);
    heard.length = 0;
    const refused = await api.call('POST', '/ip_policy_rules', { cidr: 'nonsense' });
    expect(refused.status).toBe(400);
    expect(heard).toEqual([]);
  });
});
