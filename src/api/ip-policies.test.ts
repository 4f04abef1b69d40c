import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ipAllowed } from '../core/cidr.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('IP policies API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  async function policy(description = ''): Promise<string> {
    const res = await api.call('POST', '/ip_policies', { description });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  async function rule(ipPolicyId: string, cidr: string, action = 'allow'): Promise<string> {
    const res = await api.call('POST', '/ip_policy_rules', {
      ip_policy_id: ipPolicyId,
      cidr,
      action,
    });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  it('creates a policy with description and metadata: 201 and the full shape', async () => {
    const res = await api.call('POST', '/ip_policies', {
      description: 'nyc office',
      metadata: '{"site":"nyc"}',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^ipp_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/ip_policies/${res.body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      description: 'nyc office',
      metadata: '{"site":"nyc"}',
    });
  });

  it('creates a policy from an empty body or no body at all', async () => {
    const empty = await api.call('POST', '/ip_policies', {});
    expect(empty.status).toBe(201);
    expect(empty.body).toMatchObject({ description: '', metadata: '' });
    const none = await api.call('POST', '/ip_policies');
    expect(none.status).toBe(201);
    expect(none.body.id).toMatch(/^ipp_/);
  });

  it('gets, updates only the fields sent, lists and deletes', async () => {
    const { body: created } = await api.call('POST', '/ip_policies', {
      description: 'before',
      metadata: 'm1',
    });
    expect((await api.call('GET', `/ip_policies/${created.id}`)).body).toEqual(created);
    const patched = await api.call('PATCH', `/ip_policies/${created.id}`, {
      description: 'after',
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created, description: 'after' });
    const empty = await api.call('PATCH', `/ip_policies/${created.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(patched.body);
    const list = await api.call('GET', '/ip_policies');
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/ip_policies`);
    expect(list.body.ip_policies).toContainEqual(patched.body);
    await expectDeletedForGood(api, `/ip_policies/${created.id}`);
  });

  it('pages newest first with next_page_uri', async () => {
    const ids = [await policy('p1'), await policy('p2'), await policy('p3')];
    const first = await api.call('GET', '/ip_policies?limit=2');
    expect(first.body.ip_policies.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/ip_policies?before_id=${ids[1]}&limit=2`,
    );
    const next = await api.call('GET', `/ip_policies?before_id=${ids[1]}&limit=2`);
    expect(next.body.ip_policies[0].id).toBe(ids[0]);
  });

  it('refuses too-long descriptions and metadata, and unknown fields', async () => {
    const long = await api.call('POST', '/ip_policies', { description: 'é'.repeat(128) });
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({
      error_code: 'ERR_NGROK_7073',
      details: { field: 'description' },
    });
    const meta = await api.call('POST', '/ip_policies', { metadata: 'x'.repeat(4097) });
    expect(meta.body.error_code).toBe('ERR_NGROK_100');
    const unknown = await api.call('POST', '/ip_policies', { action: 'allow' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'action' },
    });
  });

  it('refuses to delete a policy an edge references, naming the edge, until it no longer does', async () => {
    const id = await policy('in use');
    const ruleId = await rule(id, '192.0.2.0/24');
    const edgeId = 'edgtcp_2f8XhbJ2X1W4M8oVqQ1UuRgVjbw';
    await api.store.db.insertInto('refs').values({ from_id: edgeId, to_id: id }).execute();
    const refused = await api.call('DELETE', `/ip_policies/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error_code).toBe('ERR_NGROK_1420');
    expect(refused.body.msg).toContain(edgeId);
    expect((await api.call('GET', `/ip_policies/${id}`)).status).toBe(200);
    expect((await api.call('GET', `/ip_policy_rules/${ruleId}`)).status).toBe(200);
    await api.store.db.deleteFrom('refs').where('from_id', '=', edgeId).execute();
    expect((await api.call('DELETE', `/ip_policies/${id}`)).status).toBe(204);
  });

  it('deletes the rules of a deleted policy and leaves other policies alone', async () => {
    const doomed = await policy('doomed');
    const kept = await policy('kept');
    const doomedRules = [await rule(doomed, '10.0.0.0/8'), await rule(doomed, '::/0', 'deny')];
    const keptRule = await rule(kept, '10.0.0.0/8');
    expect((await api.call('DELETE', `/ip_policies/${doomed}`)).status).toBe(204);
    for (const r of doomedRules)
      expect((await api.call('GET', `/ip_policy_rules/${r}`)).status).toBe(404);
    expect((await api.call('GET', `/ip_policy_rules/${keptRule}`)).status).toBe(200);
  });

  it('has the database cascade rules when a policy row goes (foreign keys are on)', async () => {
    const id = await policy('fk');
    await rule(id, '198.51.100.0/24');
    await api.store.db.deleteFrom('ip_policies').where('id', '=', id).execute();
    const left = await api.store.db
      .selectFrom('ip_policy_rules')
      .select('id')
      .where('ip_policy_id', '=', id)
      .execute();
    expect(left).toEqual([]);
  });

  it('gives the edge the combined rules of several policies for ipAllowed', async () => {
    const office = await policy('office');
    const blocked = await policy('blocked');
    await rule(office, '10.0.0.0/8');
    await rule(office, '2001:db8::/32');
    await rule(blocked, '10.9.0.0/16', 'deny');
    const rules = await api.repos.ipPolicies.rulesFor([office, blocked, 'ipp_unknown']);
    expect(rules).toEqual([
      { cidr: '10.0.0.0/8', action: 'allow' },
      { cidr: '2001:db8::/32', action: 'allow' },
      { cidr: '10.9.0.0/16', action: 'deny' },
    ]);
    expect(ipAllowed(rules, '10.1.1.1')).toBe(true);
    expect(ipAllowed(rules, '10.9.1.1')).toBe(false);
    expect(ipAllowed(rules, '2001:db8::1')).toBe(true);
    expect(ipAllowed(rules, '192.0.2.1')).toBe(false);
    expect(await api.repos.ipPolicies.rulesFor([])).toEqual([]);
    expect(await api.repos.ipPolicies.missing([office, 'ipp_nope'])).toEqual(['ipp_nope']);
  });
});
