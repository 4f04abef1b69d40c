import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../../../test/support/browser.js';
import {
  fakeTunnel,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { LoginClient } from '../../../test/support/login-client.js';
import { startTestIdp, type TestIdp } from '../../../test/support/oidc-idp.js';
import { withPolicy } from '../../../test/support/policy.js';
import {
  allowLoopbackEgress,
  refuseInternalEgress,
} from '../../../test/support/policy-fixtures.js';
import { PolicyEventLog } from '../events.js';

/**
 * openid-connect end to end: oidc-provider as the identity provider on 127.0.0.1, a real Burrow
 * ingress in front of a real upstream, and a client that follows redirects with a cookie jar (and
 * once, Chromium). Logins as `<name>` get `<name>@example.com`, except `mallory`, who gets an
 * address at evil.test that a later rule refuses.
 */

const HOST = 'app.burrow.test';
let t: TestIngress;
let idp: TestIdp;
let upstream: LocalServer;
let origin: string;
const seen: Array<{ url: string; user: string; cookie: string }> = [];
const events = new PolicyEventLog();

function policy(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    on_http_request: [
      {
        actions: [idp.action({ allow_cors_preflight: true, ...extra })],
      },
      {
        name: 'only example.com',
        expressions: [
          "req.method != 'OPTIONS' && !actions.ngrok.oidc.identity.email.endsWith('@example.com')",
        ],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      },
      {
        expressions: ["req.method != 'OPTIONS'"],
        actions: [
          {
            type: 'add-headers',
            config: { headers: { 'x-user': '${actions.ngrok.oidc.identity.email}' } },
          },
        ],
      },
    ],
  });
}

beforeAll(async () => {
  // The provider listens on loopback.
  allowLoopbackEgress();
  t = await startTestIngress();
  origin = `http://${HOST}:${t.httpPort}`;
  idp = await startTestIdp({
    redirectUris: [`${origin}/ngrok/callback`],
    emailDomain: (login) => (login === 'mallory' ? 'evil.test' : 'example.com'),
  });
  upstream = await startHttpUpstream((req, res) => {
    seen.push({
      url: req.url ?? '',
      user: String(req.headers['x-user'] ?? ''),
      cookie: String(req.headers.cookie ?? ''),
    });
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`hello ${String(req.headers['x-user'] ?? 'nobody')}`);
  });
  t.registry.addTunnel(
    withPolicy(
      fakeTunnel({ proto: 'http', hostname: HOST, upstreamPort: upstream.port }),
      policy(),
      events,
    ),
  );
});

afterAll(async () => {
  refuseInternalEgress();
  await t?.close();
  await idp?.close();
  await upstream?.close();
});

/** A client whose requests for app.burrow.test go to the ingress. */
const client = () =>
  new LoginClient((u) => (u.hostname === HOST ? { port: t.httpPort } : undefined));

describe('openid-connect', () => {
  it('redirects an unauthenticated browser to the provider with PKCE, state and nonce', async () => {
    const c = client();
    const r = await c.send(`${origin}/private?x=1`);
    expect(r.status).toBe(302);
    const to = new URL(r.headers.location as string);
    expect(to.origin).toBe(idp.issuer);
    expect(to.searchParams.get('client_id')).toBe(idp.clientId);
    expect(to.searchParams.get('redirect_uri')).toBe(`${origin}/ngrok/callback`);
    expect(to.searchParams.get('response_type')).toBe('code');
    expect(to.searchParams.get('scope')).toBe('openid profile email');
    expect(to.searchParams.get('code_challenge_method')).toBe('S256');
    expect(to.searchParams.get('state')).toMatch(/^oidc\.[\w-]{43}$/);
    expect(to.searchParams.get('nonce')).toMatch(/^[\w-]{43}$/);
    const pending = String(r.headers['set-cookie']);
    expect(pending).toMatch(
      /^burrow_oidc_login=[\w-]+; Path=\/ngrok\/; Max-Age=600; HttpOnly; SameSite=Lax$/,
    );
    expect(seen.some((s) => s.url === '/private?x=1')).toBe(false);
  });

  it('logs in, goes back to the first URL, and the upstream sees the identity but not the cookie', async () => {
    const c = client();
    c.cookies(HOST).set('theme', 'dark');
    const hops = await c.login(`${origin}/private?x=1`, 'alice');
    const last = hops.at(-1)!;
    expect(last.status).toBe(200);
    expect(last.body).toBe('hello alice@example.com');
    expect(last.url).toBe(`${origin}/private?x=1`);
    const session = c.cookies(HOST).get('burrow_oidc');
    expect(session).toMatch(/^[\w-]{40,}$/);
    const hit = seen.findLast((s) => s.url === '/private?x=1')!;
    expect(hit.user).toBe('alice@example.com');
    expect(hit.cookie).toContain('theme=dark');
    expect(hit.cookie).not.toContain('burrow_oidc=');

    // The session holds: no more trips to the provider.
    const again = await c.send(`${origin}/other`);
    expect(again.status).toBe(200);
    expect(again.body).toBe('hello alice@example.com');
    const setCookie = hops.find((h) => h.url.includes('/ngrok/callback'))!.headers['set-cookie'];
    expect(String(setCookie)).toMatch(
      // Max-Age is the time left of the 24 h session: 86400, or 86399 when a second ticks over.
      /^burrow_oidc=[\w-]+; Path=\/; Max-Age=(?:86399|86400); HttpOnly; SameSite=Lax$/,
    );
  });

  it('lets a later rule refuse an identity it does not like', async () => {
    const c = client();
    const hops = await c.login(`${origin}/`, 'mallory');
    expect(hops.at(-1)!.status).toBe(403);
    expect(seen.some((s) => s.user.startsWith('mallory'))).toBe(false);
  });

  it('treats a changed or forged session cookie as none', async () => {
    const c = client();
    await c.login(`${origin}/`, 'bob');
    const good = c.cookies(HOST).get('burrow_oidc')!;
    const flipped = good.slice(0, 20) + (good[20] === 'A' ? 'B' : 'A') + good.slice(21);
    c.cookies(HOST).set('burrow_oidc', flipped);
    const r = await c.send(`${origin}/`);
    expect(r.status).toBe(302);
    expect(new URL(r.headers.location as string).origin).toBe(idp.issuer);
    c.cookies(HOST).set('burrow_oidc', Buffer.from('{"sub":"x"}').toString('base64url'));
    expect((await c.send(`${origin}/`)).status).toBe(302);
  });

  it('refuses a callback whose state does not match the login it started (400)', async () => {
    const c = client();
    await c.send(`${origin}/`);
    const r = await c.send(`${origin}/ngrok/callback?code=abc&state=oidc.not-the-state`);
    expect(r.status).toBe(400);
    expect(r.body).toContain('state does not match');
    const none = await client().send(`${origin}/ngrok/callback?code=abc&state=oidc.x`);
    expect(none.status).toBe(400);
    expect(none.body).toContain('cookie is missing or expired');
  });

  it('answers a code the provider refuses with 400 and a page saying so', async () => {
    const c = client();
    const start = await c.send(`${origin}/`);
    const state = new URL(start.headers.location as string).searchParams.get('state')!;
    const r = await c.send(
      `${origin}/ngrok/callback?code=forged&state=${state}&iss=${encodeURIComponent(idp.issuer)}`,
    );
    expect(r.status).toBe(400);
    expect(r.body).toContain('invalid_grant');
    const denied = await c.send(
      `${origin}/ngrok/callback?error=access_denied&error_description=nope&state=${state}`,
    );
    expect(denied.status).toBe(403);
    expect(denied.body).toContain('access_denied (nope)');
  });

  it('logs out at /ngrok/logout, and /ngrok/login starts again', async () => {
    const c = client();
    await c.login(`${origin}/`, 'carol');
    expect((await c.send(`${origin}/`)).status).toBe(200);
    const out = await c.send(`${origin}/ngrok/logout?redirect_path=/bye`);
    expect(out.status).toBe(302);
    expect(out.headers.location).toBe('/bye');
    expect(String(out.headers['set-cookie'])).toMatch(/^burrow_oidc=; Path=\/; Max-Age=0;/);
    expect(c.cookies(HOST).has('burrow_oidc')).toBe(false);
    expect((await c.send(`${origin}/`)).status).toBe(302);
    const login = await c.send(`${origin}/ngrok/login?redirect_path=//evil.test/`);
    const to = new URL(login.headers.location as string);
    expect(to.searchParams.get('prompt')).toBe('login');
    const hops = await c.signIn((await c.follow(to.href)).at(-1)!, 'carol');
    expect(hops.at(-1)!.url).toBe(`${origin}/`);
  });

  it('lets a CORS preflight through unauthenticated with allow_cors_preflight', async () => {
    const c = client();
    const r = await c.send(`${origin}/api`, {
      method: 'OPTIONS',
      headers: { origin: 'https://web.example', 'access-control-request-method': 'POST' },
    });
    expect(r.status).toBe(200);
    expect(seen.findLast((s) => s.url === '/api')).toBeDefined();
    const plain = await c.send(`${origin}/api`, { method: 'OPTIONS' });
    expect(plain.status).toBe(302);
  });

  it('logs in through a real browser (Chromium)', async () => {
    const browser = await launchBrowser([`--host-resolver-rules=MAP ${HOST} 127.0.0.1`]);
    try {
      const page = await browser.context.newPage();
      await page.goto(`${origin}/dashboard`);
      expect(page.url()).toContain(`${idp.issuer}/interaction/`);
      await page.fill('input[name=login]', 'dora');
      await page.fill('input[name=password]', 'anything');
      await Promise.all([
        page.waitForURL(`${origin}/dashboard`),
        page.click('button[type=submit]'),
      ]);
      expect(await page.textContent('body')).toBe('hello dora@example.com');
      const cookies = await browser.context.cookies(origin);
      const session = cookies.find((k) => k.name === 'burrow_oidc');
      expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
      await page.goto(`${origin}/again`);
      expect(await page.textContent('body')).toBe('hello dora@example.com');
    } finally {
      await browser.close();
    }
  }, 60_000);
});
