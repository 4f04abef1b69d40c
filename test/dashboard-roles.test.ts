import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './support/browser.js';
import {
  createApiKey,
  REPO_ROOT,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * Issue 33, roles seen from each side in Debian's Chromium against a real `burrow server`: a
 * viewer is offered no create form and no delete button (and sees no token), an operator cannot
 * reach users or bot users' changes and sees only their own API keys, and an admin changes a
 * role on the Users page, which the API then holds. Screenshots go to docs/dashboard/.
 */

const SHOTS = join(REPO_ROOT, 'docs', 'dashboard');
const PASSWORD = 'a password for the team';

describe('roles in the dashboard', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let browser: TestBrowser;
  let page: Page;
  let adminKey = '';

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${adminKey}`,
        'service-version': '2',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const nav = () => page.getByRole('navigation', { name: 'Main' });
  const open = async (name: string) => {
    await nav().getByRole('link', { name, exact: true }).click();
    await page.getByRole('heading', { level: 1, name }).waitFor();
  };
  const signInAs = async (name: string) => {
    await page.goto(`${server.url}/`);
    await page.getByRole('heading', { name: 'Sign in to Burrow' }).waitFor();
    await page.getByLabel('User name').fill(name);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  };
  const signOut = async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Burrow' }).waitFor();
  };

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    adminKey = await createApiKey(db);
    server = await startBurrowServer(db);
    for (const [name, role] of [
      ['ada', 'admin'],
      ['olga', 'operator'],
      ['victor', 'viewer'],
    ]) {
      expect((await call('POST', '/users', { name, password: PASSWORD, role })).status).toBe(201);
    }
    expect((await call('POST', '/bot_users', { name: 'sitea-agents' })).status).toBe(201);
    expect((await call('POST', '/credentials', { description: 'sitea agent' })).status).toBe(201);
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.setDefaultTimeout(15_000);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await db?.drop();
  });

  it('a viewer sees everything it may read, with no button to change it', async () => {
    await signInAs('victor');
    expect(await page.locator('.who').textContent()).toContain('(viewer)');
    await page.getByRole('note').getByText('You are a viewer').waitFor();
    expect(await nav().getByRole('link', { name: 'Users', exact: true }).count()).toBe(0);

    await open('Bot users');
    await page.getByRole('cell', { name: 'sitea-agents', exact: true }).waitFor();
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Create bot user' }).count()).toBe(0);

    await open('Authtokens');
    await page.getByRole('cell', { name: 'sitea agent', exact: true }).waitFor();
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBe(0);
    expect(await page.getByRole('form').count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'viewer.png'), fullPage: true });

    await open('API keys');
    expect(await page.getByRole('button', { name: 'Create API key' }).count()).toBe(0);
    // The admin's key is not a viewer's to see.
    await page.getByText('No API keys yet').waitFor();

    // What the page does not offer, the API refuses too.
    const refused = await page.evaluate(async () => {
      const session = (await (await fetch('/auth/session')).json()) as { csrf_token: string };
      const res = await fetch('/bot_users', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'service-version': '2',
          'x-csrf-token': session.csrf_token,
        },
        body: JSON.stringify({ name: 'sneaky' }),
      });
      return { status: res.status, body: (await res.json()) as { error_code: string } };
    });
    expect(refused).toMatchObject({
      status: 403,
      body: { error_code: 'ERR_BURROW_PERMISSION_DENIED' },
    });
    await signOut();
  });

  it('an operator manages domains and own keys, but neither users nor bot users', async () => {
    await signInAs('olga');
    expect(await nav().getByRole('link', { name: 'Users', exact: true }).count()).toBe(0);
    await open('Bot users');
    await page.getByRole('cell', { name: 'sitea-agents', exact: true }).waitFor();
    expect(await page.getByRole('button', { name: 'Create bot user' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBe(0);

    await open('Authtokens');
    await page.getByRole('cell', { name: 'sitea agent', exact: true }).waitFor();
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBeGreaterThan(0);

    await open('API keys');
    await page.getByLabel('Description').fill("olga's deploys");
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByLabel('Scopes').fill('endpoints:read');
    await page.getByRole('button', { name: 'Create API key' }).click();
    await page.getByTestId('secret').waitFor();
    await page.getByRole('cell', { name: "olga's deploys", exact: true }).waitFor();
    await page.getByRole('cell', { name: /viewer · endpoints:read/ }).waitFor();
    // One key listed: hers, not the admin's.
    expect(await page.getByRole('button', { name: /^Delete API key/ }).count()).toBe(1);
    await signOut();
  });

  it("an admin changes a user's role on the Users page, and the API holds the new one", async () => {
    await signInAs('ada');
    await open('Users');
    await page.getByRole('cell', { name: 'victor', exact: true }).waitFor();
    const patched = page.waitForResponse(
      (r) => r.request().method() === 'PATCH' && r.url().includes('/users/'),
    );
    await page.getByLabel('Role of victor').selectOption('operator');
    expect((await patched).status()).toBe(200);
    const users = (await call('GET', '/users')).body.users as Array<{ name: string; role: string }>;
    expect(users.find((u) => u.name === 'victor')?.role).toBe('operator');
    await page.screenshot({ path: join(SHOTS, 'users.png'), fullPage: true });
    await signOut();
  });
});
