import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './support/browser.js';
import { startTestIdp, type TestIdp } from './support/oidc-idp.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * Issue 33: dashboard sign-in with OpenID Connect, in Debian's Chromium, against a real
 * `burrow server` and a real OpenID provider (oidc-provider, test/support/oidc-idp.ts). A person
 * of the allowed domain signs in through the provider and appears as a user with the default role;
 * a person of another domain is sent back to the sign-in page with the reason, and no user is made.
 */

describe('dashboard sign-in with OpenID Connect', () => {
  let db: TestDatabase;
  let idp: TestIdp;
  let server: BurrowServer;
  let adminKey = '';
  const browsers: TestBrowser[] = [];

  const users = async () => {
    const res = await fetch(`${server.url}/users`, {
      headers: { authorization: `Bearer ${adminKey}`, 'service-version': '2' },
    });
    return ((await res.json()) as { users: Array<{ name: string; role: string }> }).users;
  };

  /** A fresh browser (no provider session) that signs in as `login` at the provider's form. */
  const signInThroughProvider = async (login: string): Promise<Page> => {
    const browser = await launchBrowser();
    browsers.push(browser);
    const page = await browser.context.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${server.url}/`);
    await page.getByRole('link', { name: 'Sign in with your identity provider' }).click();
    // oidc-provider's development login form.
    await page.locator('input[name=login]').fill(login);
    await page.locator('input[name=password]').fill('any password');
    await page.locator('button[type=submit]').click();
    return page;
  };

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    adminKey = await createApiKey(db);
    const port = await freePort();
    const apiUrl = `http://127.0.0.1:${port}`;
    idp = await startTestIdp({
      redirectUris: [`${apiUrl}/auth/oidc/callback`],
      emailDomain: (login) => (login === 'mallory' ? 'elsewhere.example' : 'team.example'),
    });
    server = await startBurrowServer(db, {
      args: [
        '--api-listen',
        `127.0.0.1:${port}`,
        '--public-api-url',
        apiUrl,
        '--dashboard-oidc-issuer',
        idp.issuer,
        '--dashboard-oidc-client-id',
        idp.clientId,
        '--dashboard-oidc-client-secret',
        idp.clientSecret,
        '--dashboard-oidc-allowed-domains',
        'team.example',
        // The provider listens on loopback, which the egress guard refuses otherwise.
        '--egress-allow',
        '127.0.0.1',
      ],
    });
  }, 60_000);

  afterAll(async () => {
    for (const b of browsers) await b.close();
    await server?.stop();
    await idp?.close();
    await db?.drop();
  });

  it('signs in a person of the allowed domain, made a user with the default role', async () => {
    const page = await signInThroughProvider('alice');
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    const who = await page.locator('.who').textContent();
    expect(who).toContain('alice@team.example');
    expect(who).toContain('(viewer)');
    expect(await users()).toContainEqual(
      expect.objectContaining({ name: 'alice@team.example', role: 'viewer' }),
    );
    // The session cookie is the ordinary one; the pending sign-in cookie is gone.
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'burrow_session')?.sameSite).toBe('Strict');
    expect(cookies.find((c) => c.name === 'burrow_oidc')).toBeUndefined();
    // A second sign-in finds the same user.
    const again = await signInThroughProvider('alice');
    await again.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect((await users()).filter((u) => u.name === 'alice@team.example')).toHaveLength(1);
  });

  it('sends a person of another domain back to sign-in with the reason, and makes no user', async () => {
    const page = await signInThroughProvider('mallory');
    await page.getByRole('heading', { name: 'Sign in to Burrow' }).waitFor();
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'mallory@elsewhere.example may not sign in here',
    );
    expect((await users()).map((u) => u.name)).not.toContain('mallory@elsewhere.example');
  });

  it('refuses a callback that was not started in this browser', async () => {
    const res = await fetch(`${server.url}/auth/oidc/callback?code=stolen&state=guessed`, {
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    expect(decodeURIComponent(res.headers.get('location') ?? '')).toContain(
      'This sign-in was not started here',
    );
  });
});
