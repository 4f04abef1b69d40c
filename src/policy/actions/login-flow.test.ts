import { describe, expect, it } from 'vitest';
import { bindPolicy, oneRule } from '../../../test/support/policy-fixtures.js';
import { compilePolicy } from '../compile.js';
import { ReqVars } from '../variables.js';
import { cookieKey, seal, unseal } from './auth-cookies.js';
import { configureManagedOAuthApps, type LoginConfig } from './login-config.js';
import { loginAction, LoginError, safeReturnPath, type LoginProvider } from './login-flow.js';
import type { PhaseContext } from './types.js';

/**
 * The parts of openid-connect and oauth that need no identity provider: config checks, the
 * authorization URL of each oauth provider, the sealed cookies, and the session's lifetime
 * (max duration, idle timeout, the refresh on navigation) on the runner's clock.
 * The full login against a real provider is openid-connect.test.ts.
 */

const compile = (type: string, config: Record<string, unknown>) => () =>
  compilePolicy(JSON.stringify(oneRule('on_http_request', [{ type, config }])), {
    protocol: 'https',
  });

const OIDC = { issuer_url: 'https://id.example', client_id: 'app', client_secret: 's3cret-value' };
const OAUTH = { provider: 'github', client_id: 'Iv1.abc', client_secret: 's3cret-value' };

describe('openid-connect and oauth config', () => {
  it('accepts a minimal config and names the key of each mistake', () => {
    expect(compile('openid-connect', OIDC)).not.toThrow();
    expect(compile('oauth', OAUTH)).not.toThrow();
    expect(compile('openid-connect', { ...OIDC, client_id: undefined })).toThrow(
      /config\.client_id is required/,
    );
    expect(compile('openid-connect', { ...OIDC, issuer_url: undefined })).toThrow(
      /config\.issuer_url is required/,
    );
    expect(compile('openid-connect', { ...OIDC, issuer_url: 'http://id.example' })).toThrow(
      /config\.issuer_url must be an https URL/,
    );
    expect(compile('openid-connect', { ...OIDC, client_secret: undefined })).toThrow(
      /config\.client_secret is required with client_id/,
    );
    expect(compile('openid-connect', { ...OIDC, auth_id: 'a b' })).toThrow(/config\.auth_id/);
    expect(compile('openid-connect', { ...OIDC, scopes: ['a b'] })).toThrow(/config\.scopes\[0\]/);
    expect(compile('openid-connect', { ...OIDC, max_session_duration: '10s' })).toThrow(
      /config\.max_session_duration must be from 1m/,
    );
    expect(
      compile('openid-connect', {
        ...OIDC,
        idle_session_duration: '1h',
        idle_session_timeout: '1h',
      }),
    ).toThrow(/config\.idle_session_timeout cannot be set with idle_session_duration/);
    expect(compile('openid-connect', { ...OIDC, authz_url_params: { state: 'x' } })).toThrow(
      /config\.authz_url_params\.state is set by the action itself/,
    );
    expect(compile('openid-connect', { ...OIDC, userinfo_refresh_interval: '5m' })).toThrow(
      /config\.userinfo_refresh_interval is not supported/,
    );
    expect(compile('openid-connect', { ...OIDC, auth_cookie_domain: 'not a domain' })).toThrow(
      /config\.auth_cookie_domain/,
    );
    expect(compile('openid-connect', { ...OIDC, colour: 'blue' })).toThrow(
      /unknown config key 'colour'/,
    );
    expect(compile('oauth', { ...OAUTH, provider: 'myspace' })).toThrow(
      /config\.provider must be one of google, microsoft, github, gitlab, linkedin, amazon, facebook, twitch or custom/,
    );
    expect(compile('oauth', { provider: 'google' })).toThrow(
      /config\.client_id is required: this server has no OAuth app of its own for google \(the operator sets one with --oauth-google-client-id/,
    );
    expect(compile('oauth', { ...OAUTH, client_secret: '' })).toThrow(/config\.client_secret/);
    // ngrok's examples ask for openid from any provider; the user still comes from its user API.
    expect(compile('oauth', { ...OAUTH, scopes: ['openid'] })).not.toThrow();
    expect(compile('oauth', { ...OAUTH, provider: 'amazon' })).not.toThrow();
    expect(compile('oauth', { ...OAUTH, provider: 'facebook' })).not.toThrow();
    expect(compile('oidc', OIDC)).toThrow(
      /unknown action type 'oidc'; did you mean 'openid-connect'\?/,
    );
  });

  it('runs only in on_http_request', () => {
    const text = JSON.stringify(oneRule('on_http_response', [{ type: 'oauth', config: OAUTH }]));
    expect(() => compilePolicy(text, { protocol: 'https' })).toThrow(/oauth/);
  });
});

/** The authorization URL an unauthenticated request is sent to. */
async function loginUrl(type: string, config: Record<string, unknown>): Promise<URL> {
  const { runner } = bindPolicy(oneRule('on_http_request', [{ type, config }]), 'https');
  const d = await runner.onHttpRequest({
    conn: { client_ip: '192.0.2.1' },
    req: {
      method: 'GET',
      url: '/x',
      scheme: 'https',
      headers: { host: 'app.burrow.test' },
    },
  });
  if (d.kind !== 'respond') throw new Error(`expected a redirect, got ${d.kind}`);
  expect(d.status).toBe(302);
  expect(d.headers['set-cookie']).toMatch(/; HttpOnly; SameSite=Lax; Secure$/);
  return new URL(d.headers.location!);
}

describe('oauth providers', () => {
  const cases: Array<[string, string, string]> = [
    ['google', 'https://accounts.google.com/o/oauth2/v2/auth', 'openid email profile'],
    ['microsoft', 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize', 'User.Read'],
    ['github', 'https://github.com/login/oauth/authorize', 'read:user user:email'],
    ['gitlab', 'https://gitlab.com/oauth/authorize', 'read_user'],
    ['linkedin', 'https://www.linkedin.com/oauth/v2/authorization', 'openid profile email'],
    ['twitch', 'https://id.twitch.tv/oauth2/authorize', 'user:read:email'],
    ['amazon', 'https://www.amazon.com/ap/oa', 'profile'],
    ['facebook', 'https://www.facebook.com/v19.0/dialog/oauth', 'public_profile email'],
  ];
  for (const [provider, endpoint, scopes] of cases) {
    it(`sends a ${provider} login to ${endpoint} with scopes "${scopes}"`, async () => {
      const url = await loginUrl('oauth', { ...OAUTH, provider });
      expect(`${url.origin}${url.pathname}`).toBe(endpoint);
      expect(url.searchParams.get('scope')).toBe(scopes);
      expect(url.searchParams.get('client_id')).toBe('Iv1.abc');
      expect(url.searchParams.get('response_type')).toBe('code');
      expect(url.searchParams.get('redirect_uri')).toBe('https://app.burrow.test/ngrok/callback');
      expect(url.searchParams.get('state')).toMatch(new RegExp(`^${provider}\\.`));
      expect(url.searchParams.get('code_challenge_method')).toBe('S256');
      expect(url.searchParams.has('nonce')).toBe(scopes.includes('openid'));
    });
  }

  it('logs in with any OAuth 2.0 provider by its endpoints (provider: custom)', async () => {
    const custom = {
      ...OAUTH,
      provider: 'custom',
      authorization_url: 'https://id.example.com/oauth/authorize',
      token_url: 'https://id.example.com/oauth/token',
      userinfo_url: 'https://id.example.com/api/me',
      scopes: ['read:user'],
    };
    const url = await loginUrl('oauth', custom);
    expect(`${url.origin}${url.pathname}`).toBe('https://id.example.com/oauth/authorize');
    expect(url.searchParams.get('scope')).toBe('read:user');
    expect(compile('oauth', { ...custom, token_url: 'http://id.example.com/token' })).toThrow(
      /config\.token_url must be an https URL/,
    );
    expect(compile('oauth', { ...custom, userinfo_url: undefined })).toThrow(
      /config\.userinfo_url is required/,
    );
    expect(compile('oauth', { ...OAUTH, token_url: 'https://x.example/t' })).toThrow(
      /config\.token_url is only for provider: custom/,
    );
  });

  it("uses the operator's app for a provider when the policy names no client_id (managed apps)", async () => {
    configureManagedOAuthApps({ google: { clientId: 'operator-app', clientSecret: 'op-secret' } });
    try {
      const url = await loginUrl('oauth', { provider: 'google', scopes: ['openid'] });
      expect(url.searchParams.get('client_id')).toBe('operator-app');
      expect(() =>
        compilePolicy(
          JSON.stringify(
            oneRule('on_http_request', [
              { type: 'oauth', config: { provider: 'google', client_secret: 'x' } },
            ]),
          ),
          { protocol: 'https' },
        ),
      ).toThrow(/config\.client_secret needs client_id/);
      // Another provider without an app of the operator's still needs the policy's own.
      expect(() =>
        compilePolicy(
          JSON.stringify(
            oneRule('on_http_request', [{ type: 'oauth', config: { provider: 'github' } }]),
          ),
          { protocol: 'https' },
        ),
      ).toThrow(/no OAuth app of its own for github/);
    } finally {
      configureManagedOAuthApps({});
    }
  });

  it('adds configured scopes and authz_url_params', async () => {
    const url = await loginUrl('oauth', {
      ...OAUTH,
      scopes: ['repo', 'user:email'],
      authz_url_params: { allow_signup: 'false' },
    });
    expect(url.searchParams.get('scope')).toBe('read:user user:email repo');
    expect(url.searchParams.get('allow_signup')).toBe('false');
  });
});

describe('login failures', () => {
  const get = async (type: string, config: Record<string, unknown>, url: string) => {
    const { runner } = bindPolicy(oneRule('on_http_request', [{ type, config }]), 'https');
    return runner.onHttpRequest({
      conn: { client_ip: '192.0.2.1' },
      req: { method: 'GET', url, scheme: 'https', headers: { host: 'app.burrow.test' } },
    });
  };

  it('answers 502 with a page when the provider cannot be reached', async () => {
    const d = await get('openid-connect', { ...OIDC, issuer_url: 'http://127.0.0.1:9' }, '/');
    expect(d).toMatchObject({ kind: 'respond', status: 502 });
    expect(d.kind === 'respond' && d.body).toContain('could not be reached');
  });

  it("treats another action's callback as a request that needs a session, never lets it through", async () => {
    const d = await get('oauth', OAUTH, '/ngrok/callback?state=other.x&code=y');
    expect(d).toMatchObject({ kind: 'respond', status: 302 });
    expect(d.kind === 'respond' && d.headers.location).toMatch(/^https:\/\/github\.com\//);
    const mine = await get('oauth', OAUTH, '/ngrok/callback?state=github.x&code=y');
    expect(mine).toMatchObject({ kind: 'respond', status: 400 });
  });
});

describe('login cookies', () => {
  it('open only with the same key and for the same cookie name', () => {
    const key = cookieKey('secret', 'ctx');
    const sealed = seal(key, 'a', { n: 1 });
    expect(unseal(key, 'a', sealed)).toEqual({ n: 1 });
    expect(unseal(key, 'b', sealed)).toBeUndefined();
    expect(unseal(cookieKey('secret', 'other'), 'a', sealed)).toBeUndefined();
    expect(unseal(cookieKey('other', 'ctx'), 'a', sealed)).toBeUndefined();
    expect(unseal(key, 'a', sealed.slice(0, -2))).toBeUndefined();
    expect(unseal(key, 'a', 'not base64!')).toBeUndefined();
  });

  it('go back only to paths on the same host', () => {
    expect(safeReturnPath('/a?b=1')).toBe('/a?b=1');
    expect(safeReturnPath('//evil.test/')).toBeUndefined();
    expect(safeReturnPath('/\\evil.test')).toBeUndefined();
    expect(safeReturnPath('https://evil.test/')).toBeUndefined();
    expect(safeReturnPath('/a\r\nx')).toBeUndefined();
  });
});

describe('session lifetime', () => {
  const HOUR = 3_600_000;
  // oauth, whose fixed endpoints let an expired session be redirected without a provider.
  const config = { ...OAUTH, max_session_duration: '8h', idle_session_timeout: '1h' };
  // The key every node derives from the policy (auth-cookies.ts).
  const key = cookieKey('s3cret-value', 'oauth\ngithub\nIv1.abc\ngithub');
  const cookie = (s: { iat: number; seen: number; exp: number }) =>
    `burrow_github=${seal(key, 'burrow_github', { sub: 'u1', email: 'u1@example.com', name: 'U', ...s })}`;

  function at(now: number) {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          { actions: [{ type: 'oauth', config }] },
          {
            actions: [
              {
                type: 'add-headers',
                config: { headers: { 'x-user': '${actions.ngrok.oauth.identity.email}' } },
              },
            ],
          },
        ],
      },
      'https',
      { now: () => now },
    );
    return async (cookieHeader: string, headers: Record<string, string> = {}) => {
      const d = await runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: {
          method: 'GET',
          url: '/page',
          scheme: 'https',
          headers: { host: 'app.burrow.test', cookie: cookieHeader, ...headers },
        },
      });
      if (d.kind === 'respond') return { status: d.status, headers: d.headers };
      if (d.kind === 'close') return { status: 0, headers: {} };
      return {
        status: 200,
        user: d.headers.add.find(([n]) => n === 'x-user')?.[1],
        cookie: d.headers.add.find(([n]) => n === 'cookie')?.[1],
        removed: d.headers.remove,
      };
    };
  }

  it('holds within both limits and ends at either', async () => {
    const t0 = 1_800_000_000_000;
    const fresh = cookie({ iat: t0, seen: t0, exp: t0 + 8 * HOUR });
    expect(await at(t0 + 10 * 60_000)(`${fresh}; lang=en`)).toMatchObject({
      status: 200,
      user: 'u1@example.com',
      cookie: 'lang=en',
      removed: ['cookie'],
    });
    // Idle for over an hour.
    expect((await at(t0 + HOUR + 1)(fresh)).status).toBe(302);
    // Used recently, but past the maximum duration.
    const old = cookie({ iat: t0, seen: t0 + 8 * HOUR - 60_000, exp: t0 + 8 * HOUR });
    expect((await at(t0 + 8 * HOUR - 1)(old)).status).toBe(200);
    expect((await at(t0 + 8 * HOUR)(old)).status).toBe(302);
  });

  it('refreshes the idle timer on a navigation once a quarter of it has passed', async () => {
    const t0 = 1_800_000_000_000;
    const c = cookie({ iat: t0, seen: t0, exp: t0 + 8 * HOUR });
    const now = t0 + 20 * 60_000;
    // An API call goes through without a refresh…
    expect((await at(now)(c, { accept: 'application/json' })).status).toBe(200);
    // …a page load goes round once with a new cookie.
    const nav = await at(now)(c, { 'sec-fetch-mode': 'navigate' });
    expect(nav.status).toBe(302);
    expect(nav.headers!.location).toBe('/page');
    const set = String(nav.headers!['set-cookie']);
    expect(set).toMatch(
      /^burrow_github=[\w-]+; Path=\/; Max-Age=27600; HttpOnly; SameSite=Lax; Secure$/,
    );
    const renewed = set.slice(0, set.indexOf(';'));
    // Now an hour after the first login it still holds, 40 minutes after the refresh.
    expect((await at(now + 40 * 60_000)(renewed)).status).toBe(200);
  });
});

describe('the login callback', () => {
  const cfg: LoginConfig = {
    authId: 'idp',
    clientId: 'app',
    clientSecret: 's3cret-value',
    scopes: ['openid'],
    authzParams: {},
    maxSessionMs: 3_600_000,
    idleSessionMs: 3_600_000,
    allowCorsPreflight: false,
    cookieDomain: undefined,
  };
  const now = 1_800_000_000_000;
  const pending = seal(cookieKey('s3cret-value', 'test\napp\nidp'), 'burrow_idp_login', {
    state: 'idp.s',
    nonce: 'n',
    verifier: 'v',
    back: '/',
    exp: now + 60_000,
  });

  /** The callback `query` as answered with a provider whose code exchange throws `thrown`. */
  async function callback(query: string, thrown: Error = new Error('unused')) {
    const provider: LoginProvider = {
      authorizationUrl: () => Promise.resolve(new URL('https://id.example/auth')),
      finish: () => Promise.reject(thrown),
    };
    const events: Array<{ message: string; metadata: Record<string, unknown> | undefined }> = [];
    const c = {
      activation: {
        req: new ReqVars({
          method: 'GET',
          url: `/ngrok/callback?state=idp.s&${query}`,
          scheme: 'https',
          headers: { host: 'app.burrow.test', cookie: `burrow_idp_login=${pending}` },
        }),
      },
      now: () => now,
      event: (_outcome: string, message: string, metadata?: Record<string, unknown>) =>
        events.push({ message, metadata }),
    } as unknown as PhaseContext;
    const d = await loginAction(cfg, 'test', 'test', provider).run(c);
    if (d?.kind !== 'respond') throw new Error('expected a page');
    return { status: d.status, body: d.body, event: events[0]! };
  }

  it('names the refusal of ?error= with the login refused code', async () => {
    const r = await callback('error=access_denied&error_description=nope');
    expect(r.status).toBe(403);
    expect(r.body).toContain('access_denied (nope)');
    expect(r.event.metadata).toEqual({ code: 'ERR_BURROW_LOGIN_REFUSED' });
    expect((await callback('error=server_error')).event.metadata).toEqual({
      code: 'ERR_BURROW_LOGIN_REFUSED',
    });
  });

  it('gives the provider code only to a LoginError or a network error, not to a bug', async () => {
    const refused = await callback('code=x', new LoginError(400, 'the code was refused'));
    expect(refused.status).toBe(400);
    expect(refused.event.metadata).toEqual({ code: 'ERR_BURROW_LOGIN_REFUSED' });
    const network = new TypeError('fetch failed', {
      cause: Object.assign(new Error('connect ECONNREFUSED'), {
        code: 'ECONNREFUSED',
        syscall: 'connect',
      }),
    });
    const down = await callback('code=x', network);
    expect(down.status).toBe(502);
    expect(down.event.metadata).toEqual({ code: 'ERR_BURROW_LOGIN_PROVIDER' });
    const bug = await callback(
      'code=x',
      new TypeError("Cannot read properties of undefined (reading 'sub')"),
    );
    expect(bug.status).toBe(502);
    expect(bug.body).toContain('Cannot read properties of undefined');
    expect(bug.event.metadata).toBeUndefined();
  });
});
