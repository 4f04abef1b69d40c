import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './support/browser.js';
import { CurlApi } from './support/curl.js';
import {
  createApiKey,
  REPO_ROOT,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { sshKeygen } from './support/ssh.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * The dashboard's SSH keys page (issue 32) in Debian's Chromium against a real `burrow server`:
 * a key registered there is the API's, with the fingerprint ssh-keygen prints; a weak key is
 * refused with the API's reason; delete removes it. Screenshot: docs/dashboard/ssh-keys.png.
 */

const PASSWORD = 'a password for the team';

describe('SSH keys in the dashboard', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let browser: TestBrowser;
  let page: Page;
  let keys = '';

  let api: CurlApi;

  beforeAll(async () => {
    keys = mkdtempSync(join(tmpdir(), 'burrow-dashboard-ssh-'));
    db = await createTestDatabase('sqlite');
    const apiKey = await createApiKey(db);
    server = await startBurrowServer(db);
    api = new CurlApi(server.url, apiKey);
    const admin = { name: 'ada', password: PASSWORD, role: 'admin' };
    expect((await api.post('/users', admin)).status).toBe(201);
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.setDefaultTimeout(15_000);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await db?.drop();
    rmSync(keys, { recursive: true, force: true });
  });

  it('registers a key, shows its fingerprint, refuses a weak one and deletes', async () => {
    await page.goto(`${server.url}/`);
    await page.getByLabel('User name').fill('ada');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'SSH keys' })
      .click();
    await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();

    const good = sshKeygen(keys, 'laptop', 'ed25519');
    await page.getByLabel('Public key').fill(good.line);
    await page.getByLabel('Description').fill('laptop');
    await page.getByLabel('Access rules (ACL)').fill('bind:*.team.example.com');
    await page.getByRole('button', { name: 'Register key' }).click();
    await page.getByRole('cell', { name: good.fingerprint }).waitFor();
    const listed = (await api.get('/ssh_credentials')).body.ssh_credentials as Array<{
      fingerprint: string;
      acl: string[];
    }>;
    expect(listed).toEqual([
      expect.objectContaining({ fingerprint: good.fingerprint, acl: ['bind:*.team.example.com'] }),
    ]);

    await page.getByLabel('Public key').fill(sshKeygen(keys, 'weak', 'rsa', 1024).line);
    await page.getByRole('button', { name: 'Register key' }).click();
    await page.getByText(/RSA key of 1024 bits is too weak/).waitFor();
    await page.screenshot({
      path: join(REPO_ROOT, 'docs', 'dashboard', 'ssh-keys.png'),
      fullPage: true,
    });

    await page.getByRole('button', { name: 'Delete SSH key laptop' }).click();
    await page.getByRole('button', { name: 'Really delete SSH key laptop' }).click();
    await page.getByText('No SSH keys yet').waitFor();
  });
});
