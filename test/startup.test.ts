import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { curl, CurlApi } from './support/curl.js';
import {
  createApiKey,
  databaseArgs,
  runBurrow,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';

/** Poll `check` until it holds or `ms` pass; returns whether it held. */
async function eventually(check: () => boolean, ms = 5_000): Promise<boolean> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

describe.each(DATABASE_KINDS)('burrow server startup (%s)', (kind) => {
  let db: TestDatabase;
  const servers: BurrowServer[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await db?.drop();
  });

  it('tells the first start of an empty server how to create an API key', async () => {
    const server = await startBurrowServer(db);
    servers.push(server);
    const hint = /burrow api-key create (--data-dir|--database) /;
    // On stderr for the person at the terminal, and as a warning in the log; the two pipes are
    // read independently, so wait for both.
    const inLog = () => server.logs.some((l) => l.level === 40 && hint.test(String(l.msg)));
    expect(await eventually(() => hint.test(server.stderr()) && inLog())).toBe(true);
    // The hint names this server's own data: copied as is, it creates a key the server accepts.
    const where = kind === 'sqlite' ? db.dataDir : new URL(db.database).pathname;
    expect(server.stderr()).toContain(where);

    const key = await createApiKey(db);
    const res = await new CurlApi(server.url, key).get('/bot_users');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      bot_users: [],
      uri: `${server.url}/bot_users`,
      next_page_uri: null,
    });
    expect(await server.stop()).toBe(0);
    expect(server.logs.some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM')).toBe(true);
  });

  it('exits 2 naming the option when a flag value is bad', async () => {
    const bad = (flag: string, value: string) =>
      runBurrow(['server', ...databaseArgs(db), flag, value]);
    const [res, listen, rate] = await Promise.all([
      bad('--tcp-ports', '5-1'),
      bad('--api-listen', 'nowhere'),
      bad('--api-rate-limit', 'lots'),
    ]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/--tcp-ports: '5-1' must be a range first-last/);
    expect(listen.code).toBe(2);
    expect(listen.stderr).toContain('--api-listen');
    expect(rate.code).toBe(2);
    expect(rate.stderr).toContain('--api-rate-limit');
  });

  it('exits non-zero with a message when the API port is taken', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const res = await runBurrow([
        'server',
        ...databaseArgs(db),
        '--role',
        'api',
        '--api-listen',
        `127.0.0.1:${port}`,
      ]);
      expect(res.code).toBe(1);
      expect(res.stderr).toMatch(/EADDRINUSE/);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('limits requests per API key: the 6th of 5/60s is 429 ERR_NGROK_226 with Retry-After', async () => {
    const server = await startBurrowServer(db, { args: ['--api-rate-limit', '5/60s'] });
    servers.push(server);
    const api = new CurlApi(server.url, await createApiKey(db));
    for (let i = 0; i < 5; i++) expect((await api.get('/bot_users')).status).toBe(200);
    const limited = await api.get('/bot_users');
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error_code: 'ERR_NGROK_226', status_code: 429 });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    // The limiter estimates a sliding window from two fixed ones, so the wait it names can pass
    // the window's end while the previous window's weight decays, but never a second window.
    expect(retryAfter).toBeLessThanOrEqual(120);
    expect(Number.isInteger(retryAfter)).toBe(true);
    // Another key has its own budget; the API description is not limited at all.
    expect((await new CurlApi(server.url, await createApiKey(db)).get('/bot_users')).status).toBe(
      200,
    );
    expect((await curl([`${server.url}/openapi.json`])).status).toBe(200);
    expect(await server.stop()).toBe(0);
  });
});
