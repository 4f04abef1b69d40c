import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('audit trail (%s)', (kind) => {
  let api: TestApi;
  let keyId: string;
  const PASSWORD = 'a long enough password';
  beforeAll(async () => {
    api = await createTestApi(kind);
    await api.repos.users.create('ada', PASSWORD);
    keyId = (await api.repos.apiKeys.list({ limit: 100 })).items[0]!.id;
  });
  afterAll(async () => api.close());

  /** Every audit event, newest first. */
  const events = async () => {
    const res = await api.call('GET', '/audit_events?limit=100');
    expect(res.status).toBe(200);
    return res.body.audit_events as Array<{ id: string } & Record<string, unknown>>;
  };

  it('records create, update, module PUT and delete with who, what, when and from where', async () => {
    const before = (await events()).length;
    const created = await api.call('POST', '/ip_policies', { description: 'office' });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await api.call('PATCH', `/ip_policies/${id}`, { description: 'hq' })).status).toBe(200);
    expect((await api.call('DELETE', `/ip_policies/${id}`)).status).toBe(204);

    const list = await events();
    expect(list.length).toBe(before + 3);
    const [del, patch, post] = list;
    expect(post).toEqual({
      id: expect.stringMatching(/^aud_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/audit_events/${post!.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      operation_id: created.headers['operation-id'],
      // The test key is the account's: its owner is named beside it.
      actor: { type: 'api_key', id: keyId, owner_id: await api.repos.settings.accountUserId() },
      method: 'POST',
      path: '/ip_policies',
      status_code: 201,
      resource_id: id,
      client_ip: '127.0.0.1',
    });
    expect(patch).toMatchObject({ method: 'PATCH', path: `/ip_policies/${id}`, resource_id: id });
    expect(del).toMatchObject({ method: 'DELETE', status_code: 204, resource_id: id });
    const one = await api.call('GET', `/audit_events/${post!.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(post);
    expect((await api.call('GET', '/audit_events/aud_nope')).status).toBe(404);
  });

  it('does not record reads, refused requests or the policy check that saves nothing', async () => {
    const before = (await events()).length;
    await api.call('GET', '/ip_policies');
    expect((await api.call('POST', '/ip_policies', { nope: 1 })).status).toBe(400);
    expect((await api.call('DELETE', '/ip_policies/ipp_missing')).status).toBe(404);
    expect(
      (await api.call('POST', '/ip_policies', {}, { authorization: 'Bearer bad' })).status,
    ).toBe(401);
    await api.call('POST', '/traffic_policy/validate', { value: 'on_http_request: []' });
    expect((await events()).length).toBe(before);
  });

  it('never stores a secret: no tokens from replies, no bodies, no secret path parts', async () => {
    const key = await api.call('POST', '/api_keys', { description: 'audited' });
    expect(key.status).toBe(201);
    const bot = await api.call('POST', '/bot_users', { name: 'audited bot' });
    const cred = await api.call('POST', '/credentials', {
      owner_id: bot.body.id,
      description: 'secret-description-marker',
    });
    expect(cred.status).toBe(201);
    const rows = JSON.stringify(
      await api.store.db.selectFrom('audit_events').selectAll().execute(),
    );
    for (const secret of [key.body.token, cred.body.token, api.key, 'secret-description-marker']) {
      expect(typeof secret).toBe('string');
      expect(rows).not.toContain(secret);
    }
    expect(rows).toContain(key.body.id);
    expect(rows).toContain(cred.body.id);
  });

  it('records dashboard changes under the signed-in user, sign-in included', async () => {
    const login = await api.call(
      'POST',
      '/auth/login',
      { name: 'ada', password: PASSWORD },
      { authorization: undefined, 'service-version': undefined },
    );
    expect(login.status).toBe(200);
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const userId = login.body.user.id as string;
    const made = await api.call(
      'POST',
      '/bot_users',
      { name: 'made in dashboard' },
      { authorization: undefined, cookie, 'x-csrf-token': login.body.csrf_token as string },
    );
    expect(made.status).toBe(201);
    const [change, signIn] = await events();
    expect(change).toMatchObject({
      actor: { type: 'user', id: userId },
      method: 'POST',
      path: '/bot_users',
      resource_id: made.body.id,
    });
    expect(signIn).toMatchObject({
      actor: { type: 'user', id: userId },
      method: 'POST',
      path: '/auth/login',
    });
    expect(JSON.stringify(signIn)).not.toContain(login.body.csrf_token);
    expect(JSON.stringify(signIn)).not.toContain(cookie.split('=')[1]);
  });

  it('pages with before_id and limit like every other list', async () => {
    for (let i = 0; i < 3; i++) await api.call('POST', '/ip_policies', { description: `p${i}` });
    const all = await events();
    const first = await api.call('GET', '/audit_events?limit=2');
    expect(first.body.audit_events.map((e: { id: string }) => e.id)).toEqual(
      all.slice(0, 2).map((e) => e.id),
    );
    expect(first.body.uri).toBe(`${TEST_BASE_URL}/audit_events`);
    expect(first.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/audit_events?before_id=${all[1]!.id}&limit=2`,
    );
    const next = await api.call('GET', `/audit_events?before_id=${all[1]!.id}&limit=2`);
    expect(next.body.audit_events.map((e: { id: string }) => e.id)).toEqual(
      all.slice(2, 4).map((e) => e.id),
    );
    expect((await api.call('GET', '/audit_events?limit=0')).status).toBe(400);
  });
});

describe('auditPath', () => {
  it('replaces secret path parameters by their name and drops the query', async () => {
    const { auditPath } = await import('./audit-trail.js');
    const request = {
      url: '/auth/setup/abcDEF123?x=1',
      params: { token: 'abcDEF123' },
    } as unknown as Parameters<typeof auditPath>[0];
    expect(auditPath(request)).toBe('/auth/setup/:token');
  });
});
