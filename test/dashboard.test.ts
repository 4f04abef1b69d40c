import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CA_EXTENSIONS, certificateMaker } from './support/certificates.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { CHROMIUM, launchBrowser, type TestBrowser } from './support/browser.js';
import { curl, CurlApi } from './support/curl.js';
import { edgeServerArgs, freeEdgePorts, type EdgePorts } from './support/edge-listeners.js';
import { REPO_ROOT, startBurrowServer, type BurrowServer } from './support/server-process.js';

/**
 * The dashboard in Debian's Chromium (playwright-core) against a real `burrow server` process
 * with its edge: first user from the setup link, sign-in and sign-out, an API key shown once, a
 * bot user with an authtoken, a wildcard domain with its DNS records, a TCP edge with modules and
 * a traffic policy the engine checks as it is typed, an agent stopped from the page, requests in
 * Traffic, one replayed, and cloud endpoints created, edited and deleted. Each page's screenshot
 * goes to docs/dashboard/ for docs/dashboard.md.
 */

const SHOTS = join(REPO_ROOT, 'docs', 'dashboard');
const USER = 'ada';
const PASSWORD = 'correct horse battery';
const HOST = 'app.sitea.example.test';

/** An @ngrok/ngrok agent in its own process serving `domain`, exiting when told to stop. */
async function agentProcess(env: {
  ADDR: string;
  CA: string;
  TOKEN: string;
  TO: string;
  DOMAIN: string;
}) {
  const script = `
    const { default: ngrok } = await import('@ngrok/ngrok');
    const session = await new ngrok.SessionBuilder().serverAddr(process.env.ADDR)
      .caCert(Buffer.from(process.env.CA)).authtoken(process.env.TOKEN)
      .handleStopCommand(() => process.exit(0)).connect();
    const listener = await session.httpEndpoint().domain(process.env.DOMAIN).listenAndForward(process.env.TO);
    console.log(listener.url());
    setInterval(() => undefined, 60_000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await Promise.race([
    once(child.stdout.setEncoding('utf8'), 'data').then(([l]) => String(l)),
    once(child, 'exit').then(([code]) => {
      throw new Error(`the agent exited (${String(code)}) before it was online`);
    }),
  ]);
  return { child, url: line.trim() };
}

describe('the dashboard in Chromium', () => {
  // .ci/run installs Debian's chromium; without it this must fail, not pass by skipping.
  it('has Chromium to drive', () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
  });

  let db: TestDatabase;
  let server: BurrowServer;
  let ports: EdgePorts;
  let browser: TestBrowser;
  let page: Page;
  let web: LocalServer;
  let hits = 0;
  let apiKey = '';
  let authtoken = '';
  let agent: ChildProcess | undefined;

  const shot = (name: string) =>
    page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const open = async (name: string) => {
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name, exact: true })
      .click();
    await page.getByRole('heading', { level: 1, name }).waitFor();
  };
  const api = (path: string) =>
    curl([
      `${server.url}${path}`,
      '-H',
      `Authorization: Bearer ${apiKey}`,
      '-H',
      'Service-Version: 2',
    ]);

  beforeAll(async () => {
    web = await startHttpUpstream((req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello from ${req.url}\n`);
    });
    db = await createTestDatabase('sqlite');
    ports = await freeEdgePorts();
    server = await startBurrowServer(db, { args: edgeServerArgs(ports) });
    browser = await launchBrowser();
    page = await browser.context.newPage();
    // Fail a step with playwright's message (what it waited for) before vitest's 30 s timeout.
    page.setDefaultTimeout(15_000);
  });

  afterAll(async () => {
    agent?.kill('SIGKILL');
    await browser?.close();
    await server?.stop();
    await web?.close();
    await db?.drop();
  });

  it('the setup link printed at first start creates the first user, once', async () => {
    await until(() => /#\/setup\/\S+/.test(server.stderr()), 5000);
    const link = /(http:\/\/\S+#\/setup\/\S+)/.exec(server.stderr())![1]!;
    // API clients asking for / see no change: the page is only for browsers.
    expect((await curl([`${server.url}/`])).status).toBe(404);

    await page.goto(link);
    await page.getByRole('heading', { name: 'Create the first user' }).waitFor();
    await shot('setup');
    await page.getByLabel('User name').fill(USER);
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByLabel('Password again').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create user and sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.locator('.who').textContent()).toContain(`Signed in as ${USER}`);

    // The session cookie is HttpOnly and SameSite=Strict.
    const cookie = (await browser.context.cookies()).find((c) => c.name === 'burrow_session');
    expect(cookie?.httpOnly).toBe(true);
    expect(cookie?.sameSite).toBe('Strict');
  });

  it('signs out; a wrong password fails clearly; the right one signs in; the setup link is spent', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Burrow' }).waitFor();

    const link = /(http:\/\/\S+#\/setup\/\S+)/.exec(server.stderr())![1]!;
    await page.goto(link);
    await page.getByRole('heading', { name: 'This setup link no longer works' }).waitFor();
    await page.goto(`${server.url}/`);

    await page.getByLabel('User name').fill(USER);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'Wrong user name or password.',
    );
    await shot('sign-in');

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
  });

  it('creates an API key: shown once, works with curl, not shown after a reload', async () => {
    await open('API keys');
    await page.getByText('No API keys yet').waitFor();
    await page.getByLabel('Description').fill('from the dashboard');
    await page.getByRole('button', { name: 'Create API key' }).click();
    apiKey = (await page.getByTestId('secret').textContent()) ?? '';
    expect(apiKey).toMatch(/^\S{30,}$/);
    await page.getByRole('button', { name: 'Copy the API key' }).waitFor();
    await shot('api-keys');

    const listed = await api('/api_keys');
    expect(listed.status).toBe(200);
    expect(listed.body.keys).toHaveLength(1);
    // Owned by the person who made it.
    const me = (await page.evaluate(async () => (await fetch('/auth/session')).json())) as {
      user: { id: string };
    };
    expect(listed.body.keys[0].owner_id).toBe(me.user.id);
    expect(listed.body.keys[0].token).toBeNull();

    await page.reload();
    await page.getByRole('cell', { name: 'from the dashboard', exact: true }).waitFor();
    // The owner by name, not as a raw usr_ id.
    await page.getByRole('cell', { name: `${USER} (you)`, exact: true }).waitFor();
    expect(await page.getByTestId('secret').count()).toBe(0);
    expect(await page.content()).not.toContain(apiKey);
  });

  it('creates a bot user, an authtoken it owns with ACL bind:*.sitea.example.test, and a wildcard domain', async () => {
    await open('Bot users');
    await page.getByLabel('Name').fill('sitea-agents');
    await page.getByRole('button', { name: 'Create bot user' }).click();
    await page.getByRole('cell', { name: 'sitea-agents', exact: true }).waitFor();
    await shot('bot-users');

    await open('Authtokens');
    await page.getByLabel('Description').fill('sitea agent');
    await page.getByLabel('Owner').selectOption({ label: 'Bot user sitea-agents' });
    await page.getByLabel('Rule').fill('bind:*.sitea.example.test');
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByRole('button', { name: 'Create authtoken' }).click();
    authtoken = (await page.getByTestId('secret').textContent()) ?? '';
    expect(authtoken.length).toBeGreaterThan(30);
    await page.getByRole('cell', { name: 'bind:*.sitea.example.test', exact: true }).waitFor();
    await shot('authtokens');
    const creds = await api('/credentials');
    expect(creds.body.credentials[0].acl).toEqual(['bind:*.sitea.example.test']);
    expect(creds.body.credentials[0].owner_id).toMatch(/^bot_/);

    await open('Reserved domains');
    // A name with a bad character is told so, not that it "needs at least two labels".
    await page.getByLabel('Domain', { exact: true }).fill('bad domain!');
    await page.getByRole('button', { name: 'Reserve domain' }).click();
    await page.getByText(/'bad domain!' is not valid: .*letters, digits/).waitFor();
    await page.getByLabel('Domain', { exact: true }).fill('*.sitea.example.test');
    await page.getByRole('button', { name: 'Reserve domain' }).click();
    const table = page
      .getByRole('table', { name: /DNS records to add for \*\.sitea\.example\.test/ })
      .first();
    await table.waitFor();
    const rows = table.locator('tbody tr');
    expect(await rows.count()).toBe(2);
    const text = await table.textContent();
    expect(text).toContain('*.sitea.example.test');
    expect(text).toContain('_acme-challenge.sitea.example.test');
    // This server has no ACME directory: the status says so and what to do, not "Being issued".
    const status = page.getByTestId('certificate-status').first();
    await status.waitFor();
    expect(await status.textContent()).toContain(
      'Local CA only: no ACME directory configured: upload a certificate or start with --acme-directory',
    );
    await shot('reserved-domains');
  });

  it('creates a TCP edge with backend and IP restriction; a bad policy is refused with the engine message before saving', async () => {
    await open('TCP addresses');
    await page.getByLabel('Description').fill('ssh');
    await page.getByRole('button', { name: 'Reserve an address' }).click();
    const addr = (await page.locator('tbody td code').first().textContent()) ?? '';
    expect(addr).toMatch(/:\d+$/);
    await shot('tcp-addresses');

    await open('Backends');
    await page.getByLabel('Labels').fill('app=ssh');
    await page.getByRole('button', { name: 'Create tunnel group' }).click();
    await page.locator('code.chip', { hasText: 'app=ssh' }).waitFor();
    await shot('backends');

    await open('IP policies');
    await page.getByLabel('Description').fill('office');
    await page.getByRole('button', { name: 'Create IP policy' }).click();
    await page.getByRole('heading', { name: 'office' }).waitFor();
    await page.getByLabel('CIDR').fill('203.0.113.0/24');
    await page.getByRole('button', { name: 'Add rule' }).click();
    // exact: the CIDR field's hint mentions the same network.
    await page.getByText('203.0.113.0/24', { exact: true }).waitFor();
    await shot('ip-policies');

    await open('Edges');
    await page.getByLabel('Description').fill('acme tcp edge');
    await page.getByRole('checkbox', { name: new RegExp(addr) }).check();
    await page.getByLabel('Backend').selectOption({ label: 'Tunnel group: app=ssh' });
    await page.getByRole('checkbox', { name: 'office' }).check();
    await page.getByRole('button', { name: 'Create edge' }).click();
    const edge = page.getByRole('region', { name: 'TCP edge acme tcp edge' });
    await edge.waitFor();

    await edge.getByRole('button', { name: 'Add traffic policy' }).click();
    const editor = edge.getByLabel('Traffic policy (JSON or YAML)');
    await editor.fill(
      '{"on_tcp_connect": [{"name": "Block IP", "expressions": ["conn.client_ip =="], "actions": [{"type": "deny"}]}]}',
    );
    const alert = edge.getByRole('alert');
    await alert.waitFor();
    const message = (await alert.textContent()) ?? '';
    expect(message).toContain('is not a valid expression');
    expect(message).toContain('ERR_NGROK_2200');
    expect(message).toContain('rule 0 “Block IP”');
    expect(await edge.getByRole('button', { name: 'Save traffic policy' }).isDisabled()).toBe(true);
    await shot('edges-policy-error');

    await editor.fill(
      `{"on_tcp_connect": [{"name": "Block IP", "expressions": ["conn.client_ip == '192.0.2.1'"], "actions": [{"type": "deny"}]}]}`,
    );
    await edge.getByText('The engine accepts this policy.').waitFor();
    await edge.getByRole('button', { name: 'Save traffic policy' }).click();
    await edge.locator('pre.policy').waitFor();
    await shot('edges');

    const edges = await api('/edges/tcp');
    const saved = edges.body.tcp_edges[0];
    expect(saved.hostports).toEqual([addr]);
    expect(saved.backend.backend.id).toMatch(/^bkdtg_/);
    expect(saved.ip_restriction.ip_policies).toHaveLength(1);
    expect(saved.traffic_policy.value).toContain('192.0.2.1');
  });

  it('shows an agent connected with that authtoken under Agents', async () => {
    const caPem = readFileSync(join(db.dataDir, 'ca.pem'), 'utf8');
    const started = await agentProcess({
      ADDR: `127.0.0.1:${ports.agent}`,
      CA: caPem,
      TOKEN: authtoken,
      TO: `http://127.0.0.1:${web.port}`,
      DOMAIN: HOST,
    });
    agent = started.child;
    expect(started.url).toContain(HOST);
    await open('Agents');
    await page.getByText(HOST).first().waitFor();
    await shot('agents');
  });

  it('shows requests through the HTTP endpoint in Traffic, live, and replays one to the service', async () => {
    await open('Traffic');
    await page.getByText('No requests yet').waitFor();
    for (const path of ['/hello', '/world?x=1']) {
      const res = await curl([
        `http://127.0.0.1:${ports.http}${path}`,
        ...['-H', `Host: ${HOST}`, '-H', 'Authorization: Bearer visitor-secret'],
      ]);
      expect(res.status).toBe(200);
    }
    expect(hits).toBe(2);
    await page.getByRole('button', { name: 'Inspect GET /hello' }).click();
    const detail = page.getByRole('region', { name: 'Request GET /hello' });
    await detail.getByRole('table', { name: 'Request headers' }).waitFor();
    expect(await detail.textContent()).toContain(`http://${HOST} from 127.0.0.1: 200`);
    // The visitor's credential is redacted on the page too (issue 27 item 9).
    expect(await detail.textContent()).toContain('Bearer [redacted, 14 chars]');
    expect(await page.content()).not.toContain('visitor-secret');
    await detail.getByRole('button', { name: 'Replay' }).click();
    await detail.getByText('Replayed: the service answered 200.').waitFor();
    await detail.getByText('Sent without authorization (redacted).').waitFor();
    expect(hits).toBe(3);
    await page.locator('.badge', { hasText: 'replay' }).first().waitFor();

    // With bodies captured, the detail still has the service's response headers.
    // A controlled switch: it turns on once the server said so.
    const captureSwitch = page.getByRole('checkbox', { name: `Capture bodies for ${HOST}` });
    await captureSwitch.click();
    await expect.poll(() => captureSwitch.isChecked()).toBe(true);
    const many = Array.from({ length: 30 }, (_, i) => `http://127.0.0.1:${ports.http}/page-${i}`);
    await promisify(execFile)('curl', ['-s', '-o', '/dev/null', '-H', `Host: ${HOST}`, ...many]);
    await page.getByRole('button', { name: 'Inspect GET /page-29' }).waitFor();

    // Filters: by path, by status class, by method.
    await page.getByLabel('Path contains').fill('world');
    await page.getByRole('button', { name: 'Inspect GET /world?x=1' }).waitFor();
    expect(await page.getByRole('button', { name: /^Inspect GET \/page-/ }).count()).toBe(0);
    await page.getByLabel('Path contains').fill('');
    await page.getByLabel('Status', { exact: true }).selectOption('4xx');
    await page.getByText('No request matches the filters.').waitFor();
    await page.getByLabel('Status', { exact: true }).selectOption('2xx');
    await page.getByLabel('Method', { exact: true }).selectOption('GET');
    await page.getByRole('button', { name: 'Inspect GET /page-0' }).waitFor();

    // The detail opens beside the list and in view, even for a row far down the list.
    await page.getByRole('button', { name: 'Inspect GET /page-0' }).click();
    const picked = page.getByRole('region', { name: 'Request GET /page-0' });
    const headers = picked.getByRole('table', { name: 'Response headers' });
    await headers.waitFor();
    expect(await headers.textContent()).toContain('content-type');
    const list = (await page.locator('.inspector > .table-wrap').boundingBox())!;
    const box = (await picked.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(list.x + list.width);
    const viewport = page.viewportSize()!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y).toBeLessThan(viewport.height);
    await shot('traffic');

    await open('Overview');
    await page.locator('.stat .value').first().filter({ hasText: '1' }).waitFor();
    await shot('overview');
  });

  it('lists agent and cloud endpoints with their type; creates and deletes a cloud endpoint', async () => {
    const url = 'http://cloud.sitea.example.test';
    await open('Endpoints');
    const agentRow = page.getByRole('row', { name: new RegExp(HOST.replace(/\./g, '\\.')) });
    await agentRow.waitFor();
    expect(await agentRow.textContent()).toContain('ephemeral');

    await page.getByLabel('URL').fill(url);
    await page.getByLabel('Description').fill('cloud door');
    await page
      .getByLabel(/^Traffic policy/)
      .fill(
        'on_http_request:\n  - actions:\n      - type: custom-response\n        config:\n          status_code: 200\n          content: hello from the cloud\n',
      );
    await page.getByText('The engine accepts this policy.').waitFor();
    await page.getByRole('button', { name: 'Create cloud endpoint' }).click();
    const row = page.getByRole('row', { name: /cloud\.sitea\.example\.test/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('cloud door');
    await shot('endpoints');

    const listed = await api('/endpoints');
    const cloud = listed.body.endpoints.find((e: { type: string }) => e.type === 'cloud');
    expect(cloud.url).toBe(url);
    expect(cloud.traffic_policy).toContain('custom-response');
    const served = await curl([
      `http://127.0.0.1:${ports.http}/`,
      '-H',
      'Host: cloud.sitea.example.test',
    ]);
    expect(served.text).toContain('hello from the cloud');

    await page.getByRole('button', { name: `Delete endpoint ${url}` }).click();
    await page.getByRole('button', { name: `Really delete endpoint ${url}` }).click();
    await row.waitFor({ state: 'detached' });
    const after = await api('/endpoints');
    expect(after.body.endpoints.some((e: { type: string }) => e.type === 'cloud')).toBe(false);
  });

  it("edits a cloud endpoint's policy, description and metadata; refusals change nothing; agent endpoints have no Edit", async () => {
    const url = 'http://edit.sitea.example.test';
    const served = () =>
      curl([`http://127.0.0.1:${ports.http}/`, '-H', 'Host: edit.sitea.example.test']);
    const policy = (status: number, content: string) =>
      `on_http_request:\n  - name: Answer\n    actions:\n      - type: custom-response\n        config:\n          status_code: ${status}\n          content: ${content}\n`;
    const client = new CurlApi(server.url, apiKey);
    const created = await client.post('/endpoints', {
      type: 'cloud',
      url,
      description: 'to edit',
      traffic_policy: policy(200, 'before the edit'),
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await served()).text).toContain('before the edit');

    await open('Endpoints');
    const agentRow = page.getByRole('row', { name: new RegExp(HOST.replace(/\./g, '\\.')) });
    await agentRow.waitFor();
    expect(await agentRow.getByRole('button', { name: /^Edit/ }).count()).toBe(0);
    await page.getByRole('button', { name: `Edit endpoint ${url}` }).click();
    const form = page.getByRole('form', { name: `Edit endpoint ${url}` });
    await form.waitFor();
    const editor = form.getByLabel('Traffic policy (JSON or YAML)');
    expect(await editor.inputValue()).toContain('before the edit');

    // A policy the engine refuses: its message, naming the rule, and no Save.
    await editor.fill(
      'on_http_request:\n  - name: Broken\n    expressions: ["req.method =="]\n    actions:\n      - type: deny\n',
    );
    const policyAlert = form.locator('.policy-error');
    await policyAlert.waitFor();
    expect(await policyAlert.textContent()).toContain('rule 0 “Broken”');
    expect(await policyAlert.textContent()).toContain('ERR_NGROK_2200');
    expect(await form.getByRole('button', { name: 'Save endpoint' }).isDisabled()).toBe(true);

    // A change the API refuses: its message, naming the field, in the form.
    await editor.fill(policy(201, 'after the edit'));
    await form.getByText('The engine accepts this policy.').waitFor();
    await form.getByLabel('URL', { exact: true }).fill('http://elsewhere.example.org');
    await form.getByRole('button', { name: 'Save endpoint' }).click();
    const refusal = form.locator('p.error[role="alert"]');
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain("url: the domain 'elsewhere.example.org'");
    expect(await refusal.textContent()).toContain('ERR_NGROK_319');
    await shot('endpoints-edit');
    const unchanged = await client.get(`/endpoints/${id}`);
    expect(unchanged.body).toMatchObject({ url, description: 'to edit' });
    expect(unchanged.body.traffic_policy).toContain('before the edit');
    expect((await served()).text).toContain('before the edit');

    await form.getByLabel('URL', { exact: true }).fill(url);
    await form.getByLabel('Description').fill('edited');
    await form.getByLabel('Metadata').fill('{"team":"web"}');
    await form.getByRole('button', { name: 'Save endpoint' }).click();
    await form.waitFor({ state: 'detached' });
    const row = page.getByRole('row', { name: /edit\.sitea\.example\.test/ });
    await row.filter({ hasText: 'edited' }).waitFor();

    const saved = await client.get(`/endpoints/${id}`);
    expect(saved.body).toMatchObject({
      url,
      type: 'cloud',
      description: 'edited',
      metadata: '{"team":"web"}',
      bindings: ['public'],
      pooling_enabled: false,
    });
    expect(saved.body.traffic_policy).toBe(policy(201, 'after the edit'));
    const answer = await served();
    expect(answer.status).toBe(201);
    expect(answer.text).toContain('after the edit');

    expect((await client.delete(`/endpoints/${id}`)).status).toBe(204);
    await row.waitFor({ state: 'detached' });
  });

  it('stops the agent from the page, after asking once more', async () => {
    await open('Agents');
    const exited = once(agent!, 'exit');
    // The first click only asks; Keep takes it back and the agent stays online.
    await page.getByRole('button', { name: /^Stop agent ts_/ }).click();
    await page.getByRole('button', { name: /^Really stop agent ts_/ }).waitFor();
    await shot('agents-stop-confirm');
    await page.getByRole('button', { name: 'Keep' }).click();
    expect(agent!.exitCode).toBeNull();
    await page.getByRole('button', { name: /^Stop agent ts_/ }).click();
    await page.getByRole('button', { name: /^Really stop agent ts_/ }).click();
    await exited;
    await page.getByText('No agent is connected').waitFor();
  });

  it('creates failover, weighted and static backends', async () => {
    await open('Backends');
    await page.getByRole('radio', { name: 'Static address' }).check();
    await page.getByLabel('Address', { exact: true }).fill('web.internal:8443');
    await page.getByRole('checkbox', { name: 'Connect with TLS' }).check();
    await page.getByLabel('Description').fill('static web');
    await page.getByRole('button', { name: 'Create static backend' }).click();
    await page.locator('code', { hasText: 'web.internal:8443' }).waitFor();

    await page.getByRole('radio', { name: 'Failover' }).check();
    await page.getByRole('checkbox', { name: 'Tunnel group: app=ssh', exact: true }).check();
    await page.getByRole('checkbox', { name: 'Static address: static web', exact: true }).check();
    await page.getByLabel('Description').fill('ha');
    await page.getByRole('button', { name: 'Create failover backend' }).click();
    await page.getByRole('region', { name: 'Failover backends' }).waitFor();

    await page.getByRole('radio', { name: 'Weighted' }).check();
    await page.getByLabel('Weight of Tunnel group: app=ssh').fill('90');
    await page.getByLabel('Weight of Static address: static web').fill('10');
    await page.getByLabel('Description').fill('split');
    await page.getByRole('button', { name: 'Create weighted backend' }).click();
    await page.getByRole('region', { name: 'Weighted backends' }).waitFor();
    await shot('backends-kinds');

    const statics = (await api('/backends/static')).body.backends;
    expect(statics[0]).toMatchObject({ address: 'web.internal:8443', tls: { enabled: true } });
    const group = (await api('/backends/tunnel_group')).body.backends[0].id as string;
    const failover = (await api('/backends/failover')).body.backends[0];
    expect(failover.backends).toEqual([group, statics[0].id]);
    const weighted = (await api('/backends/weighted')).body.backends[0];
    expect(weighted.backends).toEqual({ [group]: 90, [statics[0].id]: 10 });
  });

  it('uploads a TLS certificate (its key never shown back) and switches a domain between it and a managed one', async () => {
    const name = 'secure.example.test';
    const maker = certificateMaker();
    const chain = maker.make(`/CN=${name}`, [`subjectAltName=DNS:${name}`]);
    const key = maker.lastKey();
    maker.cleanup();

    await open('Reserved domains');
    await page.getByLabel('Domain', { exact: true }).fill(name);
    await page.getByRole('button', { name: 'Reserve domain' }).click();
    const card = page.getByRole('region', { name, exact: true });
    await card.waitFor();
    const choice = card.getByLabel(`Certificate for ${name}`, { exact: true });
    expect(await choice.inputValue()).toBe('managed');

    await page.getByLabel('Certificate name').fill('bought');
    await page.getByLabel('Certificate chain (PEM)').fill(chain);
    await page.getByLabel('Private key (PEM)').fill(key);
    await page.getByRole('button', { name: 'Upload certificate' }).click();
    await page.getByRole('cell', { name: 'bought', exact: true }).waitFor();
    expect(await page.getByLabel('Private key (PEM)').inputValue()).toBe('');
    const keyBody = key.split('\n')[1]!;
    expect(await page.content()).not.toContain(keyBody);
    const certs = await api('/tls_certificates');
    expect(certs.text).not.toContain(keyBody);
    const certId = certs.body.tls_certificates[0].id as string;

    await choice.selectOption(certId);
    await card.getByRole('button', { name: `Use this certificate for ${name}` }).click();
    await card.getByTestId('certificate-ref').filter({ hasText: certId }).waitFor();
    expect(await card.getByTestId('certificate-status').textContent()).toContain(
      'Uploaded certificate',
    );
    await shot('reserved-domains-certificates');
    const uploaded = (await api('/reserved_domains')).body.reserved_domains.find(
      (d: { domain: string }) => d.domain === name,
    );
    expect(uploaded.certificate.id).toBe(certId);
    expect(uploaded.certificate_management_policy).toBeNull();

    await choice.selectOption('managed');
    await card.getByRole('button', { name: `Use this certificate for ${name}` }).click();
    await card.getByTestId('certificate-ref').filter({ hasText: 'none yet' }).waitFor();
    const managed = (await api('/reserved_domains')).body.reserved_domains.find(
      (d: { domain: string }) => d.domain === name,
    );
    expect(managed.certificate_management_policy.authority).toBe('letsencrypt');
  });

  it("edits a TLS edge's TLS termination and mutual TLS, with a CA uploaded and deleted there", async () => {
    const maker = certificateMaker();
    const caPem = maker.make('/CN=Dashboard Client CA', CA_EXTENSIONS);
    maker.cleanup();

    await open('Edges');
    const cas = page.getByRole('region', { name: 'Certificate authorities' });
    await cas.getByLabel('CA name').fill('client CA');
    await cas.getByLabel('CA certificate (PEM)').fill(caPem);
    await cas.getByRole('button', { name: 'Upload certificate authority' }).click();
    await cas.getByRole('cell', { name: 'client CA', exact: true }).waitFor();

    await page.getByRole('radio', { name: 'TLS' }).check();
    await page.getByLabel('Description').fill('acme tls edge');
    await page.getByLabel('Host names with port').fill(`secure.example.test:${ports.https}`);
    await page.getByRole('button', { name: 'Create edge' }).click();
    const edge = page.getByRole('region', { name: 'TLS edge acme tls edge' });
    await edge.waitFor();

    await edge.getByRole('button', { name: 'Edit TLS termination' }).click();
    await edge.getByLabel('Terminate at').selectOption('edge');
    await edge.getByLabel('Minimum TLS version').selectOption('1.3');
    await edge.getByRole('button', { name: 'Save TLS termination' }).click();
    await edge
      .getByTestId('tls-termination')
      .filter({ hasText: 'At the edge, TLS ≥ 1.3' })
      .waitFor();

    await edge.getByRole('button', { name: 'Edit mutual TLS' }).click();
    await edge.getByRole('checkbox', { name: 'client CA' }).check();
    await edge.getByRole('button', { name: 'Save mutual TLS' }).click();
    await edge.getByTestId('mutual-tls').filter({ hasText: 'client CA' }).waitFor();
    await shot('edges-tls');

    const saved = (await api('/edges/tls')).body.tls_edges[0];
    expect(saved.tls_termination).toMatchObject({ terminate_at: 'edge', min_version: '1.3' });
    expect(saved.mutual_tls.certificate_authorities[0].id).toMatch(/^ca_/);

    // A CA still in use is kept, with the API's message.
    await cas
      .getByRole('button', { name: 'Delete certificate authority client CA', exact: true })
      .click();
    await cas
      .getByRole('button', { name: 'Really delete certificate authority client CA' })
      .click();
    await expect(cas.getByRole('alert').textContent()).resolves.toContain('ERR_NGROK_7401');

    await edge.getByRole('button', { name: 'Edit mutual TLS' }).click();
    await edge.getByRole('button', { name: 'Turn off mutual TLS' }).click();
    await edge.getByText('Off: clients need no certificate.').waitFor();
    // The refused delete still asks; now it goes through.
    await cas
      .getByRole('button', { name: 'Really delete certificate authority client CA' })
      .click();
    await cas.getByText('No certificate authorities yet').waitFor();
    expect((await api('/edges/tls')).body.tls_edges[0].mutual_tls).toBeNull();
  });

  it('works at phone width and in dark mode', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    // No page is wider than the phone: a wide table scrolls inside its own box.
    for (const name of [
      'Agents',
      'Traffic',
      'Edges',
      'Endpoints',
      'Reserved domains',
      'Authtokens',
      'API keys',
    ]) {
      await open(name);
      // Run in the page (a string: this file's types have no DOM).
      const widths = await page.evaluate<{ page: number; screen: number; wide: string[] }>(`({
        page: document.documentElement.scrollWidth,
        screen: window.innerWidth,
        // What sticks out (outside a table's own scrolling box), to name in the failure.
        wide: [...document.querySelectorAll('body *')]
          .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 &&
            !e.parentElement?.closest('.table-wrap'))
          .slice(0, 3)
          .map((e) => e.tagName.toLowerCase() + '.' + e.className),
      })`);
      expect(widths.page, `${name} is wider than the phone: ${widths.wide.join(', ')}`).toBe(
        widths.screen,
      );
    }
    await shot('phone-api-keys');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 1280, height: 860 });
    await open('Overview');
    await shot('dark-overview');
    await page.emulateMedia({ colorScheme: 'light' });
  });
});
