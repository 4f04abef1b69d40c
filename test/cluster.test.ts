import { mkdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CurlApi, curl, type CurlReply } from './support/curl.js';
import { createAuthtoken } from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { spawnNgrokAgent, type NgrokAgent } from './support/ngrok-agents.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { startEchoUpstream } from './support/tcp-upstreams.js';

/**
 * Several nodes, one Burrow (docs/operations.md "Several nodes"): one PostgreSQL and three
 * `burrow server` processes on loopback, an API node and two edge nodes. The edges listen on the
 * same ports at different loopback addresses (127.0.0.2 is edge A, 127.0.0.3 edge B), as nodes
 * behind one load balancer do on different machines. Agents are the unmodified @ngrok/ngrok in
 * child processes; a small TCP relay plays the load balancer in front of the agent listeners.
 */

const A = '127.0.0.2';
const B = '127.0.0.3';
const TIMEOUT_MS = 2500;

/** Resolves once `check` holds (polled every 50 ms); throws after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The load balancer: each connection goes to wherever `target` points when it arrives. */
async function startRelay(): Promise<{ server: Server; port: number; target: string }> {
  const relay = { server: createServer(), port: 0, target: '' };
  relay.server.on('connection', (client: Socket) => {
    const [host, port] = relay.target.split(':');
    const upstream = connect(Number(port), host);
    client.pipe(upstream).pipe(client);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.port = (relay.server.address() as { port: number }).port;
  return relay;
}

/** Send `ping` to host:port and read what comes back before the close (or 2 s). */
function tcpExchange(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    let got = '';
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(got);
    };
    const timer = setTimeout(done, 2000);
    socket.on('connect', () => socket.write('ping'));
    socket.setEncoding('utf8').on('data', (d: string) => {
      got += d;
      if (got.length >= 4) done();
    });
    socket.on('error', done).on('close', done);
  });
}

/** Whether host:port accepts a TCP connection now. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('three nodes on one PostgreSQL: cross-node routing, fail-over, revocation', () => {
  let db: TestDatabase;
  let api: BurrowServer;
  const edges: Record<'a' | 'b', BurrowServer | undefined> = { a: undefined, b: undefined };
  let client: CurlApi;
  let relay: Awaited<ReturnType<typeof startRelay>>;
  let web: LocalServer;
  let echo: LocalServer;
  let caFile: string;
  const ports = { agent: 0, http: 0, https: 0 };
  const agents: NgrokAgent[] = [];

  async function startEdge(name: 'a' | 'b', ip: string): Promise<BurrowServer> {
    const dataDir = join(db.dataDir, name);
    mkdirSync(dataDir, { recursive: true });
    return startBurrowServer(
      { dataDir, database: db.database },
      {
        readyMessage: 'cluster node joined',
        args: [
          ...['--role', 'edge', '--node-id', `edge-${name}`, '--node-listen', `${ip}:0`],
          ...['--agent-listen', `${ip}:${ports.agent}`, '--http-listen', `${ip}:${ports.http}`],
          ...['--https-listen', `${ip}:${ports.https}`],
          ...['--node-heartbeat-ms', '500', '--node-timeout-ms', String(TIMEOUT_MS)],
        ],
      },
    );
  }

  const sessions = async () =>
    (await client.get('/tunnel_sessions')).body.tunnel_sessions as Array<{
      id: string;
      node_id: string;
      credential: { id: string };
    }>;
  const endpoints = async () =>
    (await client.get('/endpoints')).body.endpoints as Array<{ public_url: string }>;

  /** A public request for `url` sent to the edge at `ip`. */
  function publicGet(ip: string, url: string): Promise<CurlReply> {
    const { hostname, port, protocol } = new URL(url);
    return curl([
      url,
      '--cacert',
      caFile,
      '--connect-to',
      `${hostname}:${port}:${ip}:${protocol === 'https:' ? ports.https : ports.http}`,
      '--max-time',
      '5',
    ]);
  }

  async function agent(options: {
    addr: string;
    token: string;
    to: string;
    listener?: string;
  }): Promise<NgrokAgent> {
    const spawned = await spawnNgrokAgent({
      ...options,
      ca: readFileSync(caFile, 'utf8'),
      // Disconnections and Stop commands print a line the test can wait for.
      session:
        `.handleDisconnection((addr, err) => { console.log('disconnected ' + err); return true; })` +
        `.handleStopCommand(() => console.log('stop command'))`,
    });
    agents.push(spawned);
    return spawned;
  }

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    ports.agent = await freePort();
    ports.http = await freePort();
    ports.https = await freePort();
    mkdirSync(join(db.dataDir, 'api'), { recursive: true });
    api = await startBurrowServer(
      { dataDir: join(db.dataDir, 'api'), database: db.database },
      { args: ['--node-id', 'api-1'] },
    );
    edges.a = await startEdge('a', A);
    edges.b = await startEdge('b', B);
    client = new CurlApi(
      api.url,
      await createApiKey({ dataDir: join(db.dataDir, 'api'), database: db.database }),
    );
    // Every node signs with the cluster's one CA: any node's ca.pem will do.
    caFile = join(db.dataDir, 'b', 'ca.pem');
    expect(readFileSync(caFile, 'utf8')).toBe(
      readFileSync(join(db.dataDir, 'a', 'ca.pem'), 'utf8'),
    );
    relay = await startRelay();
    relay.target = `${A}:${ports.agent}`;
    web = await startHttpUpstream((_req, res) => res.end('served'));
    echo = await startEchoUpstream();
  }, 90_000);

  afterAll(async () => {
    for (const a of agents) a.child.kill('SIGKILL');
    relay?.server.close();
    await web?.close();
    await echo?.close();
    for (const s of [edges.a, edges.b, api]) await s?.stop(20_000);
    await db?.drop();
  });

  let httpAgent: NgrokAgent;

  it('an agent on edge A answers HTTP, HTTPS and TCP sent to edge B; the API node lists it on A', async () => {
    const token = await createAuthtoken(client);
    httpAgent = await agent({
      addr: `127.0.0.1:${relay.port}`,
      token,
      to: `http://127.0.0.1:${web.port}`,
    });
    const tcpAgent = await agent({
      addr: `127.0.0.1:${relay.port}`,
      token,
      to: `tcp://127.0.0.1:${echo.port}`,
      listener: 'session.tcpEndpoint()',
    });
    await until(async () => (await sessions()).length === 2, 5000);
    expect((await sessions()).map((s) => s.node_id)).toEqual(['edge-a', 'edge-a']);

    const https = httpAgent.url;
    expect(https).toMatch(/^https:\/\//);
    // Edge B learns of A's tunnels through the store; the first request may come before that.
    await until(async () => (await publicGet(B, https)).text === 'served', 5000);
    expect(await publicGet(B, https)).toMatchObject({ status: 200, text: 'served' });
    expect(await publicGet(B, https.replace('https:', 'http:'))).toMatchObject({
      status: 200,
      text: 'served',
    });
    const tcpPort = Number(new URL(tcpAgent.url).port);
    await until(async () => (await tcpExchange(B, tcpPort)) === 'ping', 5000);
    expect(await tcpExchange(A, tcpPort)).toBe('ping');
    // One multiplexed link between the two edges carries every request, not one per request.
    const dialled = [...edges.a!.logs, ...edges.b!.logs].filter(
      (l) => l.msg === 'node link dialled',
    );
    expect(dialled.length).toBeLessThanOrEqual(2);
  });

  it('a TCP edge made on the API node listens on both edges within 1 s; a labeled tunnel on B serves A', async () => {
    const addr = (await client.post('/reserved_addrs', { description: 'cluster' })).body
      .addr as string;
    const port = Number(addr.split(':').pop());
    const backend = (await client.post('/backends/tunnel_group', { labels: { app: 'cluster' } }))
      .body;
    const started = Date.now();
    const made = await client.post('/edges/tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
    });
    expect(made.status).toBe(201);
    await until(async () => (await accepts(A, port)) && (await accepts(B, port)), 1000);
    expect(Date.now() - started).toBeLessThan(1000);

    const labeledAgent = await agent({
      addr: `${B}:${ports.agent}`,
      token: await createAuthtoken(client),
      to: `tcp://127.0.0.1:${echo.port}`,
      listener: "session.labeledListener().label('app', 'cluster')",
    });
    await until(async () => (await tcpExchange(A, port)) === 'ping', 5000);
    for (let i = 0; i < 3; i++) expect(await tcpExchange(A, port)).toBe('ping');
    const labeled = (await sessions()).filter((s) => s.node_id === 'edge-b');
    expect(labeled).toHaveLength(1);
    // A command sent to the API node reaches the agent on the node that holds its session.
    expect((await client.post(`/tunnel_sessions/${labeled[0]!.id}/stop`, {})).status).toBe(204);
    await until(() => labeledAgent.lines.includes('stop command'), 5000);
  });

  it('SIGKILL of edge A: its agent comes back on B with the same URL, and A is forgotten', async () => {
    const before = (await endpoints()).map((e) => e.public_url).sort();
    expect(before).toContain(httpAgent.url);
    relay.target = `${B}:${ports.agent}`;
    edges.a!.process.kill('SIGKILL');
    await until(async () => {
      const now = await sessions();
      return now.length === 3 && now.every((s) => s.node_id === 'edge-b');
    }, 20_000);
    expect((await endpoints()).map((e) => e.public_url).sort()).toEqual(before);
    expect(await publicGet(B, httpAgent.url)).toMatchObject({ status: 200, text: 'served' });
    expect(httpAgent.lines.some((l) => l.startsWith('disconnected'))).toBe(true);
  });

  it('revoking the authtoken on the API node closes its session on the edge that holds it', async () => {
    const [held] = (await sessions()).filter((s) => s.node_id === 'edge-b');
    const credential = held!.credential.id;
    const deleted = await client.delete(`/credentials/${credential}`);
    expect(deleted.status).toBe(204);
    await until(async () => (await sessions()).every((s) => s.credential.id !== credential), 5000);
    expect(
      edges.b!.logs.some((l) => l.msg === 'credential revoked: closing the agent session'),
    ).toBe(true);
  });
});
