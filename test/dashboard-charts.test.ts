import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from './support/browser.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { REPO_ROOT } from './support/server-process.js';

/**
 * Issue 33, charts: an @ngrok/ngrok agent serves a test service through a real `burrow server`;
 * the test sends it 30 requests (22 answered 2xx, two of them slowly, 5 404s and 3 500s), then
 * reads the numbers the charts draw from `GET /metrics/series` and sees them on the Overview and
 * on the endpoint's page in Debian's Chromium, each chart a uPlot canvas. Screenshots go to
 * docs/dashboard/ for docs/dashboard.md.
 */

const SHOTS = join(REPO_ROOT, 'docs', 'dashboard');
const PASSWORD = 'charts for the team';
const BODY = 'x'.repeat(1000);

/** An @ngrok/ngrok agent in its own process, forwarding a random URL to `TO`. */
async function agentProcess(env: { ADDR: string; CA: string; TOKEN: string; TO: string }) {
  const script = `
    const { default: ngrok } = await import('@ngrok/ngrok');
    const session = await new ngrok.SessionBuilder().serverAddr(process.env.ADDR)
      .caCert(Buffer.from(process.env.CA)).authtoken(process.env.TOKEN).connect();
    const listener = await session.httpEndpoint().listenAndForward(process.env.TO);
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

interface Series {
  available: boolean;
  endpoints: string[];
  time: number[];
  requests: Array<number | null>;
  agents_online: Array<number | null>;
  totals: {
    requests: number;
    status: Record<string, number>;
    latency_ms: { p50: number; p95: number; p99: number };
    bytes_in: number;
    bytes_out: number;
  };
}

describe('traffic charts in the dashboard', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let agent: ChildProcess | undefined;
  let browser: TestBrowser;
  let page: Page;
  let url = '';

  const series = async (query: string): Promise<Series> => {
    const res = await edge.api.get(`/metrics/series?${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body as Series;
  };
  const totalOf = (name: string) =>
    page.locator(`.chart-totals [data-total="${name}"]`).textContent();

  beforeAll(async () => {
    web = await startHttpUpstream((req, res) => {
      const reply = () => {
        const status = req.url === '/missing' ? 404 : req.url === '/fail' ? 500 : 200;
        res.writeHead(status, { 'content-type': 'text/plain' }).end(BODY);
      };
      if (req.url === '/slow') setTimeout(reply, 150);
      else reply();
    });
    edge = await startEdgeServer('sqlite');
    const user = await edge.api.post('/users', { name: 'ada', password: PASSWORD, role: 'admin' });
    expect(user.status, user.text).toBe(201);
    const started = await agentProcess({
      ADDR: `127.0.0.1:${edge.ports.agent}`,
      CA: edge.caPem,
      TOKEN: await createAuthtoken(edge.api),
      TO: `http://127.0.0.1:${web.port}`,
    });
    agent = started.child;
    url = started.url;
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.setDefaultTimeout(15_000);
  }, 60_000);

  afterAll(async () => {
    agent?.kill('SIGKILL');
    await browser?.close();
    await edge?.server.stop();
    await web?.close();
    await edge?.db.drop();
  });

  it('counts the requests the test sent, per endpoint and in total, with their latency and bytes', async () => {
    const send = ingressCurl(
      () => edge.ports,
      () => edge.caFile,
    );
    const paths = [
      ...Array<string>(20).fill('/ok'),
      ...Array<string>(2).fill('/slow'),
      ...Array<string>(5).fill('/missing'),
      ...Array<string>(3).fill('/fail'),
    ];
    for (const path of paths) {
      // HTTP/1.1: the same wire whichever ingress paths this tree's edge offers.
      const res = await send(url, path, ['--http1.1']);
      expect(res.status).toBe(path === '/missing' ? 404 : path === '/fail' ? 500 : 200);
    }

    const mine = await series(`endpoint=${encodeURIComponent(url)}&range=hour`);
    expect(mine.available).toBe(true);
    expect(mine.endpoints).toContain(url);
    expect(mine.time).toHaveLength(360);
    expect(mine.totals.requests).toBe(30);
    expect(mine.totals.status).toEqual({ '1xx': 0, '2xx': 22, '3xx': 0, '4xx': 5, '5xx': 3 });
    // Two of 30 took at least 150 ms (their bin starts at 128 ms): p99 is theirs, p50 well below.
    expect(mine.totals.latency_ms.p99).toBeGreaterThan(120);
    expect(mine.totals.latency_ms.p99).toBeLessThan(2000);
    expect(mine.totals.latency_ms.p50).toBeLessThan(100);
    expect(mine.totals.bytes_out).toBeGreaterThan(30 * BODY.length);
    expect(mine.totals.bytes_in).toBeGreaterThan(0);
    // The requests are in the last buckets (one or two: a 10-second boundary may fall between).
    expect(mine.requests.slice(-2).reduce<number>((a, b) => a + (b ?? 0), 0)).toBe(30);
    expect(mine.agents_online.at(-1)).toBe(1);

    const total = await series('range=hour');
    expect(total.totals.requests).toBeGreaterThanOrEqual(30);
    const day = await series(`endpoint=${encodeURIComponent(url)}&range=day`);
    expect(day.time).toHaveLength(288);
    expect(day.totals.requests).toBe(30);
    expect(day.totals.status['5xx']).toBe(3);
  });

  it('draws them on the Overview, with the agents online', async () => {
    await page.goto(`${edge.server.url}/`);
    await page.getByLabel('User name').fill('ada');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    const charts = page.getByRole('region', { name: 'Traffic charts' });
    await charts.getByRole('heading', { name: 'Traffic, last hour' }).waitFor();
    await page.locator('.chart-totals').waitFor();
    expect(Number(await totalOf('requests'))).toBeGreaterThanOrEqual(30);
    for (const name of [
      'Requests per second',
      'Status classes (requests per 10 s)',
      'Latency (ms)',
      'Bytes',
      'Agents online',
    ]) {
      const canvas = charts.getByRole('figure', { name }).locator('canvas');
      await canvas.waitFor();
      expect((await canvas.boundingBox())!.width).toBeGreaterThan(200);
    }
    await page.screenshot({ path: join(SHOTS, 'overview-charts.png'), fullPage: true });
  });

  it("draws the endpoint's own on its page, for the last hour and day", async () => {
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Endpoints' })
      .click();
    await page.getByRole('link', { name: url, exact: true }).click();
    await page.getByRole('heading', { level: 1, name: `Endpoint ${url}` }).waitFor();
    const charts = page.getByRole('region', { name: 'Traffic charts' });
    await page.locator('.chart-totals').waitFor();
    expect(await totalOf('requests')).toBe('30');
    expect(await totalOf('2xx')).toBe('22');
    expect(await totalOf('4xx')).toBe('5');
    expect(await totalOf('5xx')).toBe('3');
    expect(await charts.locator('figure.chart canvas').count()).toBe(4);
    expect(await charts.getByRole('figure', { name: 'Agents online' }).count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'endpoint-charts.png'), fullPage: true });

    await charts.getByRole('button', { name: 'Last day' }).click();
    await charts.getByRole('heading', { name: 'Traffic, last day' }).waitFor();
    await charts.getByRole('figure', { name: 'Status classes (requests per 5 min)' }).waitFor();
    expect(await totalOf('requests')).toBe('30');
    expect(await charts.locator('figure.chart canvas').count()).toBe(4);
  });
});
