import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const DENIED = 'ERR_BURROW_PERMISSION_DENIED';

describe.each(DATABASE_KINDS)('roles, keys and scopes (%s)', (kind) => {
  let api: TestApi;
  let adminId: string;
  let operatorId: string;
  let operatorKey: string;
  beforeAll(async () => {
    api = await createTestApi(kind);
    adminId = (await api.repos.users.create('ada', 'admin password')).id;
    operatorId = (await api.repos.users.create('otto', 'operator password', 'operator')).id;
    operatorKey = (await api.repos.apiKeys.create({ owner_id: operatorId })).token!;
  });
  afterAll(async () => api.close());

  const as = (token: string) => ({ authorization: `Bearer ${token}` });

  it('makes the first user admin and later ones viewers unless told', async () => {
    expect((await api.repos.users.get(adminId))?.role).toBe('admin');
    const later = await api.repos.users.create('vera', 'viewer password');
    expect(later.role).toBe('viewer');
  });

  it("an operator sees and manages their own keys only; others' are not there", async () => {
    const adminKey = await api.call('POST', '/api_keys', { description: 'the admin key' });
    const own = await api.call('POST', '/api_keys', { description: 'mine' }, as(operatorKey));
    expect(own.status).toBe(201);
    expect(own.body).toMatchObject({ owner_id: operatorId, role: null, scopes: null });
    const list = await api.call('GET', '/api_keys', undefined, as(operatorKey));
    expect(list.status).toBe(200);
    const owners = new Set(list.body.keys.map((k: { owner_id: string }) => k.owner_id));
    expect([...owners]).toEqual([operatorId]);
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const res = await api.call(
        method,
        `/api_keys/${adminKey.body.id}`,
        method === 'PATCH' ? { description: 'mine now' } : undefined,
        as(operatorKey),
      );
      expect(res.status).toBe(404);
    }
    expect((await api.call('GET', `/api_keys/${adminKey.body.id}`)).status).toBe(200);
    const forOther = await api.call('POST', '/api_keys', { owner_id: adminId }, as(operatorKey));
    expect(forOther.status).toBe(403);
    expect(forOther.body).toMatchObject({ error_code: DENIED });
    expect(forOther.body.msg).toContain('owner_id');
  });

  it("a key's role is its owner's or narrower, and a narrower key is held to it", async () => {
    const wider = await api.call('POST', '/api_keys', { role: 'admin' }, as(operatorKey));
    expect(wider.status).toBe(403);
    expect(wider.body).toMatchObject({ error_code: DENIED });
    expect(wider.body.msg).toContain('role: admin is wider');
    const bad = await api.call('POST', '/api_keys', { role: 'root' }, as(operatorKey));
    expect(bad.status).toBe(400);
    expect(bad.body.details.field).toBe('role');
    const narrow = await api.call('POST', '/api_keys', { role: 'viewer' }, as(operatorKey));
    expect(narrow.status).toBe(201);
    expect(narrow.body.role).toBe('viewer');
    const viewerKey = narrow.body.token as string;
    expect((await api.call('GET', '/ip_policies', undefined, as(viewerKey))).status).toBe(200);
    const write = await api.call('POST', '/ip_policies', {}, as(viewerKey));
    expect(write.status).toBe(403);
    expect(write.body).toMatchObject({
      error_code: DENIED,
      details: { required: 'ip_policies:write', role: 'viewer' },
    });
    // A viewer key cannot make keys at all, so it cannot make a wider one.
    const minted = await api.call('POST', '/api_keys', {}, as(viewerKey));
    expect(minted.status).toBe(403);
  });

  it('scopes limit a key to some resources; keys it makes get no more', async () => {
    const scoped = await api.call('POST', '/api_keys', {
      scopes: ['endpoints:write', 'api_keys:write', 'endpoints:write'],
    });
    expect(scoped.status).toBe(201);
    expect(scoped.body.scopes).toEqual(['api_keys:write', 'endpoints:write']);
    const key = scoped.body.token as string;
    expect((await api.call('GET', '/endpoints', undefined, as(key))).status).toBe(200);
    const other = await api.call('GET', '/reserved_domains', undefined, as(key));
    expect(other.status).toBe(403);
    expect(other.body.msg).toContain("this API key's scopes (api_keys:write, endpoints:write)");
    const child = await api.call('POST', '/api_keys', {}, as(key));
    expect(child.status).toBe(201);
    expect(child.body.scopes).toEqual(['api_keys:write', 'endpoints:write']);
    const widened = await api.call('POST', '/api_keys', { scopes: ['vaults:read'] }, as(key));
    expect(widened.status).toBe(403);
    expect(widened.body.msg).toContain('scopes: vaults:read is outside');
    const unknown = await api.call('POST', '/api_keys', { scopes: ['endpoints:delete'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.details.field).toBe('scopes[0]');
    const none = await api.call('POST', '/api_keys', { scopes: [] });
    expect(none.status).toBe(400);
  });

  it("a user's new role holds for their keys from the next request", async () => {
    const user = await api.call('POST', '/users', {
      name: 'paul',
      password: 'a password',
      role: 'operator',
    });
    expect(user.status).toBe(201);
    expect(user.body).toMatchObject({ name: 'paul', role: 'operator' });
    expect(JSON.stringify(user.body)).not.toContain('a password');
    const key = (await api.repos.apiKeys.create({ owner_id: user.body.id })).token!;
    expect((await api.call('POST', '/ip_policies', {}, as(key))).status).toBe(201);
    const demoted = await api.call('PATCH', `/users/${user.body.id}`, { role: 'viewer' });
    expect(demoted.body.role).toBe('viewer');
    expect((await api.call('POST', '/ip_policies', {}, as(key))).status).toBe(403);
    expect((await api.call('GET', '/users', undefined, as(key))).status).toBe(403);
    expect((await api.call('DELETE', `/users/${user.body.id}`)).status).toBe(204);
    expect((await api.call('GET', '/ip_policies', undefined, as(key))).status).toBe(401);
  });

  it('keeps an admin: the last one can be neither demoted nor deleted', async () => {
    const admins = (await api.call('GET', '/users')).body.users.filter(
      (u: { role: string }) => u.role === 'admin',
    );
    expect(admins).toHaveLength(1);
    const demote = await api.call('PATCH', `/users/${adminId}`, { role: 'operator' });
    expect(demote.status).toBe(409);
    expect(demote.body.error_code).toBe('ERR_BURROW_LAST_ADMIN');
    expect((await api.call('DELETE', `/users/${adminId}`)).status).toBe(409);
    const second = await api.call('POST', '/users', {
      name: 'second-admin',
      password: 'another password',
      role: 'admin',
    });
    expect((await api.call('PATCH', `/users/${adminId}`, { role: 'operator' })).status).toBe(200);
    expect((await api.call('PATCH', `/users/${second.body.id}`, { role: 'viewer' })).status).toBe(
      409,
    );
    await api.call('PATCH', `/users/${adminId}`, { role: 'admin' });
  });

  it('the audit trail names the owner of the key that made a change', async () => {
    const made = await api.call(
      'POST',
      '/ip_policies',
      { description: 'by otto' },
      as(operatorKey),
    );
    expect(made.status).toBe(201);
    const events = await api.call('GET', '/audit_events?limit=1');
    expect(events.body.audit_events[0]).toMatchObject({
      actor: { type: 'api_key', owner_id: operatorId },
      resource_id: made.body.id,
    });
    const denied = await api.call('GET', '/audit_events', undefined, as(operatorKey));
    expect(denied.status).toBe(403);
  });

  it('OIDC users: found by subject, never a password user taken over, role from groups', async () => {
    const users = api.repos.users;
    const first = await users.signInWithOidc(
      'https://id.test sub-1',
      'kim@example.com',
      'viewer',
      false,
    );
    expect(first).toMatchObject({ name: 'kim@example.com', role: 'viewer' });
    // Found again by subject; without role groups the role stays what an admin made it.
    await users.setRole(first.id, 'operator');
    const again = await users.signInWithOidc('https://id.test sub-1', 'renamed', 'viewer', false);
    expect(again).toMatchObject({ id: first.id, role: 'operator' });
    // With role groups, the groups decide at each sign-in.
    const grouped = await users.signInWithOidc('https://id.test sub-1', 'x', 'admin', true);
    expect(grouped).toMatchObject({ id: first.id, role: 'admin' });
    // The name of a password user is not the provider's to claim.
    await expect(
      users.signInWithOidc('https://id.test sub-2', 'ada', 'admin', true),
    ).rejects.toThrow('signs in with a password');
    expect(await users.authenticate('kim@example.com', '!oidc')).toBeUndefined();
  });

  it("a viewer's session reads, shows its role and changes nothing", async () => {
    await api.repos.users.create('vivian', 'viewer password', 'viewer');
    const login = await api.call(
      'POST',
      '/auth/login',
      { name: 'vivian', password: 'viewer password' },
      { authorization: undefined },
    );
    expect(login.body.user.role).toBe('viewer');
    const session = {
      authorization: undefined,
      cookie: String(login.headers['set-cookie']).split(';')[0]!,
      'x-csrf-token': login.body.csrf_token as string,
    };
    expect((await api.call('GET', '/reserved_domains', undefined, session)).status).toBe(200);
    const del = await api.call('POST', '/reserved_domains', { domain: 'x.example.com' }, session);
    expect(del.status).toBe(403);
    expect(del.body.error_code).toBe(DENIED);
    expect((await api.call('GET', '/users', undefined, session)).status).toBe(403);
  });
});
