import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('IP policy rules API (%s)', (kind) => {
  let api: TestApi;
  let policyId: string;
  beforeAll(async () => {
    api = await createTestApi(kind);
    policyId = (await api.call('POST', '/ip_policies', { description: 'rules' })).body.id;
  });
  afterAll(async () => api.close());

  const create = (body: Record<string, unknown>) =>
    api.call('POST', '/ip_policy_rules', { ip_policy_id: policyId, action: 'allow', ...body });

  it('creates the reference example: 201 with the policy as a Ref', async () => {
    const res = await api.call('POST', '/ip_policy_rules', {
      action: 'allow',
      cidr: '212.3.14.0/24',
      description: 'nyc office',
      ip_policy_id: policyId,
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^ipr_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/ip_policy_rules/${res.body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      description: 'nyc office',
      metadata: '',
      cidr: '212.3.14.0/24',
      ip_policy: { id: policyId, uri: `${TEST_BASE_URL}/ip_policies/${policyId}` },
      action: 'allow',
    });
    expect((await api.call('GET', `/ip_policy_rules/${res.body.id}`)).body).toEqual(res.body);
  });

  it('stores CIDRs in canonical text, IPv4 and IPv6', async () => {
    const cases: Array<[string, string]> = [
      [' 198.51.100.0/24 ', '198.51.100.0/24'],
      ['172.16.0.0/012', '172.16.0.0/12'],
      ['2001:0DB8:0000::/48', '2001:db8::/48'],
      ['::/0', '::/0'],
      ['::ffff:203.0.113.0/120', '203.0.113.0/24'],
    ];
    for (const [input, stored] of cases) {
      const res = await create({ cidr: input, action: 'deny' });
      expect(res.status, input).toBe(201);
      expect(res.body).toMatchObject({ cidr: stored, action: 'deny' });
    }
  });

  it('refuses invalid CIDRs with the code for each problem', async () => {
    const invalid = await create({ cidr: '10.0.0.300/24' });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({
      error_code: 'ERR_NGROK_1406',
      details: { field: 'cidr' },
    });
    expect((await create({ cidr: '10.0.0.0/33' })).body.error_code).toBe('ERR_NGROK_1406');
    expect((await create({ cidr: 'fe80::%eth0/64' })).body.error_code).toBe('ERR_NGROK_1406');
    const noMask = await create({ cidr: '10.1.2.3' });
    expect(noMask.status).toBe(400);
    expect(noMask.body.error_code).toBe('ERR_NGROK_1413');
    expect(noMask.body.msg).toContain('10.1.2.3/32');
    const notNetwork = await create({ cidr: '10.0.0.1/8' });
    expect(notNetwork.status).toBe(400);
    expect(notNetwork.body).toMatchObject({
      error_code: 'ERR_NGROK_1409',
      details: { field: 'cidr' },
    });
    expect(notNetwork.body.msg).toContain("'10.0.0.0/8'");
    const v6 = await create({ cidr: '2001:db8::1/64' });
    expect(v6.body.error_code).toBe('ERR_NGROK_1409');
    expect(v6.body.msg).toContain("'2001:db8::/64'");
  });

  it('refuses a CIDR the policy already has, in any spelling, but not in another policy', async () => {
    const first = await create({ cidr: '192.0.2.0/24' });
    expect(first.status).toBe(201);
    for (const again of ['192.0.2.0/24', '192.0.2.0/024', '::ffff:192.0.2.0/120']) {
      const dup = await create({ cidr: again, action: 'deny' });
      expect(dup.status, again).toBe(409);
      expect(dup.body.error_code).toBe('ERR_NGROK_1408');
      expect(dup.body.msg).toContain(first.body.id);
    }
    const other = (await api.call('POST', '/ip_policies', {})).body.id;
    const elsewhere = await api.call('POST', '/ip_policy_rules', {
      ip_policy_id: other,
      cidr: '192.0.2.0/24',
      action: 'allow',
    });
    expect(elsewhere.status).toBe(201);
  });

  it('refuses a bad action with ERR_NGROK_1410, and missing fields by name', async () => {
    for (const action of ['permit', 'ALLOW', '']) {
      const res = await create({ cidr: '203.0.113.0/24', action });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_1410',
        details: { field: 'action' },
      });
    }
    const noAction = await api.call('POST', '/ip_policy_rules', {
      ip_policy_id: policyId,
      cidr: '203.0.113.0/24',
    });
    expect(noAction.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'action: is required',
    });
    const noCidr = await create({});
    expect(noCidr.body).toMatchObject({ error_code: 'ERR_NGROK_215', msg: 'cidr: is required' });
    const noPolicy = await api.call('POST', '/ip_policy_rules', {
      cidr: '203.0.113.0/24',
      action: 'allow',
    });
    expect(noPolicy.body.msg).toBe('ip_policy_id: is required');
  });

  it('refuses an ip_policy_id that names no policy', async () => {
    for (const id of ['ipp_2f8XhbJ2X1W4M8oVqQ1UuRgVjbw', 'bot_nope', '']) {
      const res = await create({ cidr: '203.0.113.0/24', ip_policy_id: id });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_223',
        details: { field: 'ip_policy_id' },
      });
    }
  });

  it('updates description, metadata and cidr; an empty PATCH changes nothing', async () => {
    const { body: created } = await create({ cidr: '100.64.0.0/10', metadata: 'm' });
    const patched = await api.call('PATCH', `/ip_policy_rules/${created.id}`, {
      cidr: '100.64.0.0/16',
      description: 'narrower',
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      ...created,
      cidr: '100.64.0.0/16',
      description: 'narrower',
    });
    const empty = await api.call('PATCH', `/ip_policy_rules/${created.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(patched.body);
    const bad = await api.call('PATCH', `/ip_policy_rules/${created.id}`, {
      cidr: '100.64.0.1/16',
    });
    expect(bad.body.error_code).toBe('ERR_NGROK_1409');
    expect((await api.call('GET', `/ip_policy_rules/${created.id}`)).body).toEqual(patched.body);
  });

  it('refuses to change action or ip_policy_id, saying to delete and recreate', async () => {
    const { body: created } = await create({ cidr: '233.252.0.0/24' });
    for (const body of [{ action: 'deny' }, { ip_policy_id: policyId, description: 'x' }]) {
      const field = Object.keys(body)[0]!;
      const res = await api.call('PATCH', `/ip_policy_rules/${created.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.error_code).not.toBe('ERR_NGROK_214');
      expect(res.body.details.field).toBe(field);
      expect(res.body.msg).toMatch(/cannot be changed/);
      expect(res.body.msg).toMatch(/[Dd]elete the rule and create a new one/);
    }
    expect((await api.call('GET', `/ip_policy_rules/${created.id}`)).body).toEqual(created);
  });

  it('refuses a PATCH that would duplicate another rule of the policy', async () => {
    const a = (await create({ cidr: '198.18.0.0/16' })).body;
    const b = (await create({ cidr: '198.19.0.0/16' })).body;
    const res = await api.call('PATCH', `/ip_policy_rules/${b.id}`, { cidr: '198.18.0.0/16' });
    expect(res.status).toBe(409);
    expect(res.body.error_code).toBe('ERR_NGROK_1408');
    expect(res.body.msg).toContain(a.id);
    expect((await api.call('GET', `/ip_policy_rules/${b.id}`)).body.cidr).toBe('198.19.0.0/16');
  });

  it('lists rules newest first with paging, and deletes them', async () => {
    const ids = [
      (await create({ cidr: '10.10.0.0/16' })).body.id,
      (await create({ cidr: '10.11.0.0/16' })).body.id,
    ];
    const list = await api.call('GET', '/ip_policy_rules?limit=1');
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/ip_policy_rules`);
    expect(list.body.ip_policy_rules.map((r: { id: string }) => r.id)).toEqual([ids[1]]);
    expect(list.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/ip_policy_rules?before_id=${ids[1]}&limit=1`,
    );
    const next = await api.call('GET', `/ip_policy_rules?before_id=${ids[1]}&limit=1`);
    expect(next.body.ip_policy_rules[0].id).toBe(ids[0]);
    const del = await api.call('DELETE', `/ip_policy_rules/${ids[0]}`);
    expect(del.status).toBe(204);
    expect((await api.call('GET', `/ip_policy_rules/${ids[0]}`)).status).toBe(404);
    expect((await api.call('DELETE', `/ip_policy_rules/${ids[0]}`)).status).toBe(404);
    expect((await api.call('PATCH', `/ip_policy_rules/${ids[0]}`, {})).status).toBe(404);
  });
});
