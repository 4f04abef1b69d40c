import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { spawnNgrokAgent, type NgrokAgent } from './support/ngrok-agents.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  ingressCurl,
  type EdgePorts,
} from './support/edge-listeners.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';

/**
 * Revocation that bites, with real processes: two `burrow server --role all` on one PostgreSQL,
 * @ngrok/ngrok agents in child processes (session.close() keeps the TCP connection open, so only
 * a process of its own shows what the edge really does). A credential deleted, or its bot user
 * deactivated, through one server's API cuts the agent on the other server within 2 s.
 */

/** Resolves once `check` holds (polled every 50 ms); throws after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('revocation across two server processes on one PostgreSQL', () => {
  let db: TestDatabase;
  const servers: BurrowServer[] = [];
  const ports: EdgePorts[] = [];
  const apis: CurlApi[] = [];
  const agents: NgrokAgent[] = [];
  let caPem: string;
  let web: LocalServer;

  /** An agent on server `i` with a new authtoken (body: credential fields). */
  async function agentOn(i: number, body: object = {}): Promise<NgrokAgent> {
    const token = await createAuthtoken(apis[0]!, body);
    const agent = await spawnNgrokAgent({
      addr: `127.0.0.1:${ports[i]!.agent}`,
      ca: caPem,
      token,
      to: `http://127.0.0.1:${web.port}`,
      // Reports each disconnection on stdout, for the test to wait on.
      session: `.handleDisconnection((addr, err) => { console.log('disconnected ' + err); return true; })`,
    });
    agents.push(agent);
    return agent;
  }
  const sessionsOn = async (i: number) =>
    (await apis[i]!.get('/tunnel_sessions')).body.tunnel_sessions as Array<{
      id: string;
      credential: { id: string };
    }>;
  const revokedCodes = (i: number) =>
    servers[i]!.logs.filter((l) => l.msg === 'credential revoked: closing the agent session').map(
      (l) => l.code,
    );
  const publicGet = (i: number, url: string) =>
    ingressCurl(
      () => ports[i]!,
      () => join(db.dataDir, 'ca.pem'),
    )(url, '/');

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    for (let i = 0; i < 2; i++) {
      ports.push(await freeEdgePorts());
      servers.push(await startBurrowServer(db, { args: edgeServerArgs(ports[i]!) }));
    }
    const key = await createApiKey(db);
    for (const s of servers) apis.push(new CurlApi(s.url, key));
    // Both servers share the data folder, so they share the local CA.
    caPem = readFileSync(join(db.dataDir, 'ca.pem'), 'utf8');
    web = await startHttpUpstream((_req, res) => res.end('served'));
  }, 60_000);
  afterAll(async () => {
    for (const a of agents) a.child.kill('SIGKILL');
    await web?.close();
    for (const s of servers) await s.stop(20_000);
    await db?.drop();
  });

  it('a credential deleted through server A cuts the agent on server B within 2 s', async () => {
    const agent = await agentOn(1);
    expect(await publicGet(1, agent.url)).toMatchObject({ status: 200, text: 'served' });
    const [session] = await sessionsOn(1);
    const started = Date.now();
    const deleted = await apis[0]!.delete(`/credentials/${session!.credential.id}`);
    expect(deleted.status).toBe(204);
    await until(async () => (await sessionsOn(1)).length === 0, 3000);
    const ms = Date.now() - started;
    expect(ms).toBeLessThan(2000);
    expect((await publicGet(1, agent.url)).status).toBe(404);
    // Server B logged the code it sent in the GOAWAY (ngrok-rust reports only "transport
    // error"; src/edge/revocation.test.ts reads the GOAWAY text), and the agent cannot come back.
    expect(revokedCodes(1)).toContain('ERR_NGROK_107');
    await until(() => agent.lines.some((l) => l.startsWith('disconnected')), 5000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await sessionsOn(1)).toHaveLength(0);
    expect(await sessionsOn(0)).toHaveLength(0);
  });

  it('a bot user deactivated through server A cuts its agent on server B, not the others', async () => {
    const bot = await apis[0]!.post('/bot_users', { name: 'revoked-bot' });
    expect(bot.status).toBe(201);
    const owned = await agentOn(1, { owner_id: bot.body.id });
    const other = await agentOn(1);
    expect(await sessionsOn(1)).toHaveLength(2);
    const started = Date.now();
    expect((await apis[0]!.patch(`/bot_users/${bot.body.id}`, { active: false })).status).toBe(200);
    await until(async () => (await sessionsOn(1)).length === 1, 3000);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await publicGet(1, owned.url)).status).toBe(404);
    expect(await publicGet(1, other.url)).toMatchObject({ status: 200, text: 'served' });
    expect(revokedCodes(1)).toContain('ERR_NGROK_636');
  });

  it('in the process that served the API call, the cut is immediate', async () => {
    // Both servers are nodes of one cluster: each lists every agent, so find this one's.
    const before = new Set((await sessionsOn(0)).map((s) => s.id));
    const agent = await agentOn(0);
    const session = (await sessionsOn(0)).find((s) => !before.has(s.id));
    const credential = session!.credential.id;
    const started = Date.now();
    expect((await apis[0]!.delete(`/credentials/${credential}`)).status).toBe(204);
    await until(
      async () => (await sessionsOn(0)).every((s) => s.credential.id !== credential),
      3000,
    );
    expect(Date.now() - started).toBeLessThan(1000);
    expect((await publicGet(0, agent.url)).status).toBe(404);
  });

  it('a deleted API key is refused at once, on both servers', async () => {
    const created = await apis[0]!.post('/api_keys', { description: 'short-lived' });
    expect(created.status).toBe(201);
    const short = [0, 1].map((i) => new CurlApi(servers[i]!.url, created.body.token as string));
    expect((await short[1]!.get('/credentials')).status).toBe(200);
    expect((await apis[0]!.delete(`/api_keys/${created.body.id}`)).status).toBe(204);
    for (const api of short) {
      const res = await api.get('/credentials');
      expect(res.status).toBe(401);
      expect(res.body.error_code).toBe('ERR_NGROK_203');
    }
  });
});
