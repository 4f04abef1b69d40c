import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, launchBrowser, type TestBrowser } from './support/browser.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { freePort, REPO_ROOT, spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * The local inspector of `burrow http` in Debian's Chromium: a request through the public URL
 * appears as it happens (the page polls every 500 ms), its JSON body is shown pretty, replay and
 * replay with changes reach the service again, the filter hides rows, the status page shows the
 * tunnel's metrics. The page loads nothing from outside the agent (the test fails any request to
 * another origin). Screenshots go to docs/agent-inspector/ for docs/agent-api.md.
 */

const SHOTS = join(REPO_ROOT, 'docs', 'agent-inspector');

describe('the agent inspector in Chromium', () => {
  it('has Chromium to drive', () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
  });

  let edge: EdgeServer;
  let service: LocalServer;
  let agent: RunningBurrow;
  let browser: TestBrowser;
  let page: Page;
  let home: string;
  let api: string;
  let publicUrl: string;
  const received: string[] = [];
  const foreign: string[] = [];
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );
  const shot = (name: string) =>
    page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    edge = await startEdgeServer('sqlite');
    const token = await createAuthtoken(edge.api, { description: 'inspector' });
    home = mkdtempSync(join(tmpdir(), 'burrow-inspector-'));
    service = await startHttpUpstream((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(`${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, path: req.url }));
      });
    });
    const port = await freePort();
    agent = spawnBurrow(
      [
        'http',
        String(service.port),
        '--server',
        `127.0.0.1:${edge.ports.agent}`,
        '--authtoken',
        token,
        '--ca',
        edge.caFile,
        '--web-addr',
        `127.0.0.1:${port}`,
      ],
      { XDG_CONFIG_HOME: join(home, 'none') },
    );
    await until(
      () => /^Forwarding (\S+)/m.test(agent.stdout()) || agent.child.exitCode !== null,
      20_000,
    );
    publicUrl = /^Forwarding (\S+)/m.exec(agent.stdout())![1]!;
    api = `http://127.0.0.1:${port}`;
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.on('request', (req) => {
      if (!req.url().startsWith(api)) foreign.push(req.url());
    });
  });
  afterAll(async () => {
    await browser?.close();
    agent?.child.kill('SIGINT');
    await agent?.exit;
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    rmSync(home, { recursive: true, force: true });
  });

  it('shows a request as it happens, with its JSON body pretty-printed', async () => {
    await page.goto(`${api}/`);
    await page.getByText('No requests yet').waitFor();
    const reply = await curlUrl(publicUrl, '/webhook?delivery=1', [
      '-H',
      'content-type: application/json',
      '--data',
      '{"event":"push","commits":[{"id":"a1"}]}',
    ]);
    expect(reply.status).toBe(200);
    const row = page.locator('#requests tbody tr', { hasText: '/webhook?delivery=1' });
    await row.waitFor();
    await expect(row.innerText()).resolves.toMatch(/POST\s+\/webhook\?delivery=1\s+200/);
    await row.click();
    const requestBody = page.locator('#request-detail pre.body');
    await expect(requestBody.innerText()).resolves.toBe(
      JSON.stringify({ event: 'push', commits: [{ id: 'a1' }] }, null, 2),
    );
    await expect(page.locator('#response-detail').innerText()).resolves.toContain(
      '"path": "/webhook?delivery=1"',
    );
    await expect(page.locator('#request-detail').innerText()).resolves.toMatch(
      /Content-Type\s+application\/json/,
    );
    await shot('request');
  });

  it('replays the request, and replays it with a changed body, to the service', async () => {
    const before = received.length;
    await page.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.getByText('Replayed: the new request is at the top.').waitFor();
    expect(received[before]).toBe(
      'POST /webhook?delivery=1 {"event":"push","commits":[{"id":"a1"}]}',
    );
    await page.getByRole('button', { name: 'Replay with changes' }).click();
    await page.locator('#edit-form textarea[name=body]').fill('{"event":"tag"}');
    await page.locator('#edit-form input[name=uri]').fill('/webhook?delivery=2');
    await shot('replay-with-changes');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('#requests tbody tr', { hasText: '/webhook?delivery=2' }).waitFor();
    expect(received[before + 1]).toBe('POST /webhook?delivery=2 {"event":"tag"}');
    await expect(page.locator('#requests tbody tr').count()).resolves.toBe(3);
  });

  it('filters the list, and the status page shows the tunnel and its metrics', async () => {
    await page.locator('#filter').fill('delivery=2');
    await expect(page.locator('#requests tbody tr').count()).resolves.toBe(1);
    await page.locator('#filter').fill('');
    await page.goto(`${api}/status`);
    const row = page.locator('#tunnels tbody tr', { hasText: 'command_line' });
    await row.waitFor();
    await expect(row.innerText()).resolves.toContain(publicUrl);
    await expect(page.locator('#session').innerText()).resolves.toContain(
      `127.0.0.1:${edge.ports.agent}`,
    );
    await shot('status');
    expect(foreign).toEqual([]);
  });

  it('shows form fields as a list, binary as hex, and says when a body was cut', async () => {
    await page.goto(`${api}/inspect/http`);
    await curlUrl(publicUrl, '/form', ['--data', 'name=Ada&lang=en']);
    const binary = join(home, 'bytes.bin');
    writeFileSync(binary, Buffer.from([0x00, 0xff, 0x10]));
    await curlUrl(publicUrl, '/binary', [
      '-H',
      'content-type: application/octet-stream',
      '--data-binary',
      `@${binary}`,
    ]);
    const big = 'x'.repeat(70 * 1024);
    await curlUrl(publicUrl, '/big', ['-H', 'content-type: text/plain', '--data', big]);
    await page.locator('#requests tbody tr', { hasText: '/form' }).click();
    await expect(page.locator('#request-detail dl').innerText()).resolves.toMatch(
      /name\s+Ada\s+lang\s+en/,
    );
    await page.locator('#requests tbody tr', { hasText: '/binary' }).click();
    await page.getByText('Binary body, shown as hex').waitFor();
    await expect(page.locator('#request-detail pre.body').innerText()).resolves.toMatch(
      /^000000 {2}00 ff 10 /,
    );
    await page.locator('#requests tbody tr', { hasText: '/big' }).click();
    await page.getByText(/Captured 65536 of \d+ bytes/).waitFor();
  });
});
