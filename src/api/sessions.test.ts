import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { policyLocation } from './policy-validation.js';

describe.each(DATABASE_KINDS)('dashboard sessions (%s)', (kind) => {
  let api: TestApi;
  const PASSWORD = 'a long enough password';
  beforeAll(async () => {
    api = await createTestApi(kind);
    await api.repos.users.create('grace', PASSWORD);
  });
  afterAll(async () => api.close());

  /** Sign in; returns the cookie header value and the CSRF token. */
  const signIn = async () => {
    const res = await api.call(
      'POST',
      '/auth/login',
      { name: 'grace', password: PASSWORD },
      {
        authorization: undefined,
        'service-version': undefined,
      },
    );
    expect(res.status).toBe(200);
    const setCookie = String(res.headers['set-cookie']);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    return { cookie: setCookie.split(';')[0]!, csrf: res.body.csrf_token as string };
  };
  const asSession = (cookie: string, extra: Record<string, string> = {}) => ({
    authorization: undefined,
    cookie,
    ...extra,
  });

  it('refuses a wrong password and an unknown name alike, with a clear message', async () => {
    for (const body of [
      { name: 'grace', password: 'wrong password' },
      { name: 'nobody', password: PASSWORD },
    ]) {
      const res = await api.call('POST', '/auth/login', body, { authorization: undefined });
      expect(res.status).toBe(401);
      expect(res.body.msg).toBe('Wrong user name or password.');
    }
  });

  it('a session reads the API and, with the CSRF header, changes it; keys made there are owned by the user', async () => {
    const { cookie, csrf } = await signIn();
    expect((await api.call('GET', '/bot_users', undefined, asSession(cookie))).status).toBe(200);
    const noCsrf = await api.call('POST', '/api_keys', {}, asSession(cookie));
    expect(noCsrf.status).toBe(403);
    const foreign = await api.call(
      'POST',
      '/api_keys',
      {},
      asSession(cookie, { 'x-csrf-token': csrf, origin: 'https://evil.example', host: 'api.test' }),
    );
    expect(foreign.status).toBe(403);
    const made = await api.call(
      'POST',
      '/api_keys',
      {},
      asSession(cookie, { 'x-csrf-token': csrf }),
    );
    expect(made.status).toBe(201);
    const user = (await api.repos.users.list()).find((u) => u.name === 'grace')!;
    expect(made.body.owner_id).toBe(user.id);
  });

  it('signs out: the cookie no longer works', async () => {
    const { cookie, csrf } = await signIn();
    const out = await api.call(
      'POST',
      '/auth/logout',
      undefined,
      asSession(cookie, { 'x-csrf-token': csrf }),
    );
    expect(out.status).toBe(204);
    const after = await api.call('GET', '/bot_users', undefined, asSession(cookie));
    expect(after.status).toBe(401);
    expect(after.body.msg).toContain('Sign in again');
  });

  it('rate-limits failed sign-ins per name and address', async () => {
    await api.repos.users.create('limited', PASSWORD);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push(
        (
          await api.call(
            'POST',
            '/auth/login',
            { name: 'limited', password: 'nope nope' },
            { authorization: undefined },
          )
        ).status,
      );
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  });

  it('the setup token works once, only while no user exists', async () => {
    const token = await api.repos.users.issueSetupToken(60_000);
    // A user exists already (grace), so the link is dead.
    expect(
      (await api.call('GET', `/auth/setup/${token}`, undefined, { authorization: undefined })).body,
    ).toEqual({ valid: false });
    const res = await api.call(
      'POST',
      '/auth/setup',
      { token, name: 'x', password: PASSWORD },
      { authorization: undefined },
    );
    expect(res.status).toBe(403);
  });

  it('validates a traffic policy without saving, naming the rule', async () => {
    const bad = await api.call('POST', '/traffic_policy/validate', {
      protocol: 'tcp',
      value:
        '{"on_tcp_connect":[{"name":"Block","expressions":["conn.client_ip =="],"actions":[{"type":"deny"}]}]}',
    });
    expect(bad.status).toBe(200);
    expect(bad.body).toMatchObject({
      valid: false,
      error: { error_code: 'ERR_NGROK_2200' },
      location: { phase: 'on_tcp_connect', rule: 0, rule_name: 'Block' },
    });
    const good = await api.call('POST', '/traffic_policy/validate', {
      protocol: 'tcp',
      value: 'on_tcp_connect:\n  - actions:\n      - type: deny\n',
    });
    expect(good.body).toEqual({ valid: true });
  });

  it('serves the page only to browsers', async () => {
    const api404 = await api.call('GET', '/', undefined, { authorization: undefined });
    expect(api404.status).toBe(404);
  });
});

describe('policyLocation', () => {
  it('reads phase, rule and action from engine messages', () => {
    expect(policyLocation('value: phase on_tcp_connect, rule 0, action 1 (nope): unknown')).toEqual(
      {
        phase: 'on_tcp_connect',
        rule: 0,
        action: 1,
        action_type: 'nope',
      },
    );
    expect(policyLocation('cannot parse')).toBeUndefined();
  });
});
