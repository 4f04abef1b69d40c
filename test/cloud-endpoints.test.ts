import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startTestUpstream } from './support/http-upstream.js';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { readAll } from './support/mux.js';
import type { TestDatabase } from './support/stores.js';
import { refusalOf, spawnNgrokAgent, connectNgrok } from './support/ngrok-agents.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  ingressCurl,
  type EdgePorts,
  startEdgeServer,
  hostGet,
} from './support/edge-listeners.js';
import { freePortRange } from './support/port-range.js';
import { runBurrow, startBurrowServer, type BurrowServer } from './support/server-process.js';
import { websocketExchange, websocketUpgrade } from './support/websocket.js';

/**
 * Today's routing model with the unmodified @ngrok/ngrok against a real `burrow server`: cloud
 * endpoints (stored, no agent), internal endpoints (never public), forward-internal routed by
 * CEL, endpoint pooling with an agent killed mid-traffic, and bad input refused clearly.
 */

/** One GET on the plain HTTP ingress with a Host header, over `agent` (keep-alive). */
async function get(port: number, host: string, path: string, agent: http.Agent) {
  const { status, body, headers } = await hostGet(port, host, path, agent);
  return { status, body, code: headers['burrow-error-code'] as string | undefined };
}

const until = async (check: () => Promise<boolean>, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** How many ports this file's server has for reserved addresses, and where it looks for them. */
const TCP_PORTS = 4;
/** Below the default 20000-20999 and edges-live's 21000-31999, which other files' servers use. */
const TCP_PORT_REGION = { from: 10_000, to: 20_000 };

describe('cloud endpoints, internal endpoints, forward-internal and pooling (sqlite)', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  let caPem: string;
  let authtoken: string;
  /**
   * `--tcp-ports` of this file's server: a range of its own, probed free, instead of the default
   * 20000-20999 that every other end-to-end server shares. Reserved addresses are handed out
   * lowest port first, so with the default this file's reserved address would be 20000 like any
   * other file's, and whichever server listened on 127.0.0.1:20000 first would take its clients.
   */
  let tcpPorts: { first: number; last: number };
  const tcpPortArgs = (): string[] => ['--tcp-ports', `${tcpPorts.first}-${tcpPorts.last}`];
  const upstreams: LocalServer[] = [];
  const sessions: ngrok.Session[] = [];
  const children: ChildProcess[] = [];
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 16 });

  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );
  const upstream = async (name: string): Promise<string> => {
    const up = await startHttpUpstream((req, res) => res.end(`${name}:${req.url}`));
    upstreams.push(up);
    return `http://127.0.0.1:${up.port}`;
  };
  const connect = async (): Promise<ngrok.Session> => {
    const session = await connectNgrok(ports, caPem, authtoken);
    sessions.push(session);
    return session;
  };
  const reserve = async (domain: string): Promise<void> => {
    const res = await api.post('/reserved_domains', { domain });
    expect(res.status, res.text).toBe(201);
  };
  const forwardPolicy = (rules: Array<{ expressions?: string[]; url: string }>): string =>
    JSON.stringify({
      on_http_request: rules.map((r) => ({
        expressions: r.expressions ?? [],
        actions: [{ type: 'forward-internal', config: { url: r.url } }],
      })),
    });

  beforeAll(async () => {
    const first = await freePortRange(TCP_PORTS, TCP_PORT_REGION);
    tcpPorts = { first, last: first + TCP_PORTS - 1 };
    ({ db, ports, server, api, caFile, caPem } = await startEdgeServer('sqlite', tcpPortArgs()));
    authtoken = await createAuthtoken(api);
    await reserve('app.example.com');
    await reserve('down.example.com');
    await reserve('loop.example.com');
    await reserve('chat.example.com');
  }, 60_000);
  afterAll(async () => {
    keepAlive.destroy();
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await Promise.all(upstreams.map((u) => u.close()));
    await server?.stop(20_000);
    await db?.drop();
  });

  it('routes a cloud endpoint by path to two internal SDK agents, and lists both kinds', async () => {
    const session = await connect();
    const apiEp = await session
      .httpEndpoint()
      .domain('api.internal')
      .binding('internal')
      .listenAndForward(await upstream('api'));
    expect(apiEp.url()).toBe('https://api.internal');
    // The binding follows from the name when the agent leaves it out.
    const webEp = await session
      .httpEndpoint()
      .domain('web.internal')
      .listenAndForward(await upstream('web'));
    expect(webEp.url()).toBe('https://web.internal');

    const created = await api.post('/endpoints', {
      type: 'cloud',
      url: 'https://app.example.com',
      description: 'front door',
      traffic_policy: forwardPolicy([
        { expressions: ["req.url.path.startsWith('/api/')"], url: 'https://api.internal' },
        {
          expressions: ["'beta' in req.headers && req.headers['beta'][0] == 'yes'"],
          url: 'https://api.internal',
        },
        { url: 'https://web.internal' },
      ]),
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({
      type: 'cloud',
      url: 'https://app.example.com',
      bindings: ['public'],
    });

    const viaTls = (p: string, extra: string[] = []) =>
      curlUrl(`https://app.example.com:${ports.https}`, p, extra);
    await until(async () => (await viaTls('/api/x')).status === 200);
    expect(await viaTls('/api/users')).toMatchObject({ status: 200, text: 'api:/api/users' });
    expect(await viaTls('/index.html')).toMatchObject({ status: 200, text: 'web:/index.html' });
    expect(await viaTls('/home', ['-H', 'beta: yes'])).toMatchObject({
      status: 200,
      text: 'api:/home',
    });
    // Plain HTTP too, many requests on one kept-alive connection.
    for (let i = 0; i < 20; i++) {
      const path = i % 2 === 0 ? `/api/${i}` : `/page/${i}`;
      const reply = await get(ports.http, 'app.example.com', path, keepAlive);
      expect(reply.body).toBe(`${i % 2 === 0 ? 'api' : 'web'}:${path}`);
    }

    const listed = await api.get('/endpoints');
    const kinds = (
      listed.body.endpoints as Array<{ type: string; url: string; bindings: string[] }>
    ).map((e) => `${e.type} ${e.url} ${e.bindings.join()}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'cloud https://app.example.com public',
        'ephemeral https://api.internal internal',
        'ephemeral https://web.internal internal',
      ]),
    );
  });

  it('carries a WebSocket through a cloud endpoint to an internal SDK agent', async () => {
    const echo = await startTestUpstream();
    upstreams.push(echo);
    const session = await connect();
    await session
      .httpEndpoint()
      .domain('ws.internal')
      .binding('internal')
      .listenAndForward(`http://127.0.0.1:${echo.port}`);
    const created = await api.post('/endpoints', {
      url: 'https://chat.example.com',
      traffic_policy: JSON.stringify({
        on_http_request: [
          {
            expressions: ["req.url.path.startsWith('/ws')"],
            actions: [{ type: 'forward-internal', config: { url: 'https://ws.internal' } }],
          },
        ],
      }),
    });
    expect(created.status, created.text).toBe(201);
    await until(
      async () => (await websocketUpgrade(ports.http, 'chat.example.com', '/x')).status === 502,
    );
    const reply = await websocketUpgrade(ports.http, 'chat.example.com', '/ws/room');
    try {
      expect(reply.status).toBe(101);
      expect(await websocketExchange(reply, ['hello', 'from the public side'])).toEqual([
        'HELLO',
        'FROM THE PUBLIC SIDE',
      ]);
    } finally {
      if ('socket' in reply) reply.socket.destroy();
    }
    // Not forwarded: the cloud endpoint's clear error, at once.
    const unhandled = await websocketUpgrade(ports.http, 'chat.example.com', '/elsewhere');
    expect(unhandled.status).toBe(502);
    expect(unhandled.headers['burrow-error-code']).toBe('ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED');
  });

  it('never serves an internal endpoint on the public listeners', async () => {
    // Positive control: both internal endpoints are online and serve through the cloud endpoint.
    expect((await get(ports.http, 'app.example.com', '/api/secret', keepAlive)).body).toBe(
      'api:/api/secret',
    );
    expect((await get(ports.http, 'app.example.com', '/secret', keepAlive)).body).toBe(
      'web:/secret',
    );
    for (const host of ['api.internal', 'web.internal']) {
      const plain = await get(ports.http, host, '/api/secret', keepAlive);
      expect(plain.status).toBe(404);
      expect(plain.code).toBe('ERR_NGROK_3200');
      expect(plain.body).not.toMatch(/^(api|web):/);
      // HTTPS: no certificate is issued for an internal name, so the handshake is refused.
      const tls = await curlUrl(`https://${host}:${ports.https}`, '/api/secret').catch(() => ({
        status: 0,
        text: '',
      }));
      expect(tls.text).not.toMatch(/^(api|web):/);
      expect([0, 404]).toContain(tls.status);
    }
  });

  it('answers with its policy when no agent is online, and with an error page, never a hang', async () => {
    const policy = JSON.stringify({
      on_http_request: [
        {
          expressions: ["req.url.path == '/status'"],
          actions: [{ type: 'custom-response', config: { status_code: 200, body: 'all good' } }],
        },
        {
          expressions: ["req.url.path == '/old'"],
          actions: [{ type: 'redirect', config: { to: 'https://down.example.com/new' } }],
        },
        {
          expressions: ["req.url.path.startsWith('/svc')"],
          actions: [{ type: 'forward-internal', config: { url: 'https://gone.internal' } }],
        },
      ],
    });
    const created = await api.post('/endpoints', {
      url: 'https://down.example.com',
      traffic_policy: policy,
    });
    expect(created.status, created.text).toBe(201);
    await until(
      async () => (await get(ports.http, 'down.example.com', '/status', keepAlive)).status === 200,
    );
    expect(await get(ports.http, 'down.example.com', '/status', keepAlive)).toMatchObject({
      body: 'all good',
    });
    expect((await get(ports.http, 'down.example.com', '/old', keepAlive)).status).toBe(302);
    const started = Date.now();
    const unhandled = await get(ports.http, 'down.example.com', '/other', keepAlive);
    expect(unhandled).toMatchObject({ status: 502, code: 'ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED' });
    const offline = await get(ports.http, 'down.example.com', '/svc/1', keepAlive);
    expect(offline).toMatchObject({ status: 502, code: 'ERR_BURROW_INTERNAL_ENDPOINT_OFFLINE' });
    expect(offline.body).toMatch(/gone\.internal/);
    expect(Date.now() - started).toBeLessThan(2000);

    // PATCH applies to live traffic (with the id in the body, as the reference lists it).
    const id = created.body.id as string;
    const patched = await api.patch(`/endpoints/${id}`, {
      id,
      traffic_policy: JSON.stringify({
        on_http_request: [{ actions: [{ type: 'custom-response', config: { body: 'patched' } }] }],
      }),
    });
    expect(patched.status, patched.text).toBe(200);
    await until(
      async () => (await get(ports.http, 'down.example.com', '/x', keepAlive)).body === 'patched',
    );
  });

  it('forwards a TCP cloud endpoint on a reserved address to an internal TCP agent endpoint', async () => {
    const echo = await startTcpUpstream((s) => s.pipe(s));
    upstreams.push(echo);
    const session = await connect();
    const internal = await session
      .tcpEndpoint()
      .remoteAddr('db.internal:5432')
      .listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    expect(internal.url()).toBe('tcp://db.internal:5432');
    // Only this test's server can echo this, whoever else listens on 127.0.0.1.
    const payload = `ping over tcp ${randomUUID()}`;
    const roundTrip = async (port: number): Promise<string> => {
      const client = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      client.on('error', () => undefined);
      await once(client, 'connect');
      client.end(payload);
      return String(await readAll(client));
    };
    const cannotListen = (port: number): boolean =>
      server.logs.some((l) => l.msg === 'tcp endpoint cannot listen' && l.port === port);
    // The range was free when the server started; should another process take a port of it all
    // the same, the server says it cannot listen there: reserve the next address and try that.
    for (let attempt = 1; ; attempt++) {
      const reserved = await api.post('/reserved_addrs', { description: 'db front' });
      expect(reserved.status, reserved.text).toBe(201);
      const hostport = reserved.body.addr as string;
      const port = Number(hostport.slice(hostport.lastIndexOf(':') + 1));
      expect(port).toBeGreaterThanOrEqual(tcpPorts.first);
      expect(port).toBeLessThanOrEqual(tcpPorts.last);
      const created = await api.post('/endpoints', {
        url: `tcp://${hostport}`,
        traffic_policy: JSON.stringify({
          on_tcp_connect: [
            { actions: [{ type: 'forward-internal', config: { url: 'tcp://db.internal:5432' } }] },
          ],
        }),
      });
      expect(created.status, created.text).toBe(201);
      await until(
        async () => cannotListen(port) || (await roundTrip(port).catch(() => '')) === payload,
      );
      if (!cannotListen(port)) break;
      expect(port, `127.0.0.1:${port} was taken by another process`).toBeLessThan(tcpPorts.last);
      expect((await api.delete(`/endpoints/${created.body.id}`)).status).toBe(204);
    }
  });

  it('pools two agents on one URL round robin; a killed one leaves the pool at once', async () => {
    const name = 'pool.burrow.test';
    const pooledAgent = async (who: string) =>
      spawnNgrokAgent({
        addr: `127.0.0.1:${ports.agent}`,
        ca: caPem,
        token: authtoken,
        to: await upstream(who),
        listener: `session.httpEndpoint().scheme('HTTP').domain(${JSON.stringify(name)}).poolingEnabled(true)`,
      });
    const a = await pooledAgent('A');
    const b = await pooledAgent('B');
    children.push(a.child, b.child);
    expect(a.url).toBe(b.url);

    // Without pooling, a third agent is refused with the code and the owner's session.
    const session = await connect();
    const refused = await refusalOf(session.httpEndpoint().scheme('HTTP').domain(name).listen());
    expect(refused.errorCode, refused.message).toBe('ERR_NGROK_334');
    expect(refused.message).toMatch(/ts_[0-9A-Za-z]{27}/);

    const counts = new Map<string, number>();
    const count = (body: string) =>
      counts.set(body.slice(0, 1), (counts.get(body.slice(0, 1)) ?? 0) + 1);
    const batch = async (n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          get(ports.http, name, `/r${i}`, keepAlive).catch(() => undefined),
        ),
      );
    for (const reply of await batch(200)) {
      expect(reply?.status).toBe(200);
      count(reply!.body);
    }
    expect(counts.get('A')).toBeGreaterThan(20);
    expect(counts.get('B')).toBeGreaterThan(20);

    // Kill A while requests flow: only those in flight at that moment may fail; the edge takes
    // A out of the pool as soon as its session ends.
    const concurrency = 8;
    let failed = 0;
    let sent = 0;
    const worker = async () => {
      while (sent < 400) {
        const i = sent++;
        if (i === 100) a.child.kill('SIGKILL');
        const reply = await get(ports.http, name, `/k${i}`, keepAlive).catch(() => undefined);
        if (!reply || reply.status !== 200) failed++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    console.info(
      `pooling: 200 requests A=${counts.get('A')} B=${counts.get('B')}; 400 with A killed at #100: ${failed} failed`,
    );
    // A dead member left in the pool would fail every request picked for it (a 502 each).
    expect(failed).toBeLessThanOrEqual(concurrency);
    // The last requests all went to B.
    for (const reply of await batch(20)) expect(reply?.body).toMatch(/^B:/);
  });

  it('refuses bad input clearly and keeps serving', async () => {
    const publicForward = await api.post('/endpoints', {
      url: 'https://loop.example.com',
      traffic_policy: forwardPolicy([{ url: 'https://example.com' }]),
    });
    expect(publicForward.status).toBe(400);
    expect(publicForward.body.error_code).toBe('ERR_NGROK_2204');
    expect(publicForward.body.msg).toMatch(/forward-internal.*is public/s);

    const outside = await api.post('/endpoints', {
      url: 'https://loop.example.com',
      bindings: ['internal'],
    });
    expect(outside.status).toBe(400);
    expect(outside.body.error_code).toBe('ERR_BURROW_INTERNAL_NAME');
    const session = await connect();
    const agentOutside = await refusalOf(
      session.httpEndpoint().domain('app.example.com').binding('internal').listen(),
    );
    expect(agentOutside.message).toMatch(/ERR_BURROW_INTERNAL_NAME|\.internal/);

    const unreserved = await api.post('/endpoints', { url: 'https://not-mine.example.org' });
    expect(unreserved.status).toBe(400);
    expect(unreserved.body.error_code).toBe('ERR_NGROK_319');
    expect(unreserved.body.msg).toMatch(/not reserved/);

    // A loop of two internal cloud endpoints, entered from a public one.
    for (const [from, to] of [
      ['https://a.internal', 'https://b.internal'],
      ['https://b.internal', 'https://a.internal'],
      ['https://loop.example.com', 'https://a.internal'],
    ] as const) {
      const res = await api.post('/endpoints', {
        url: from,
        traffic_policy: forwardPolicy([{ url: to }]),
      });
      expect(res.status, res.text).toBe(201);
    }
    await until(
      async () => (await get(ports.http, 'loop.example.com', '/', keepAlive)).status === 508,
    );
    const loop = await get(ports.http, 'loop.example.com', '/', keepAlive);
    expect(loop.code).toBe('ERR_BURROW_FORWARD_LOOP');
    expect(loop.body).toMatch(/loop\.example\.com → a\.internal → b\.internal → a\.internal/);
    const loopedUpgrade = await websocketUpgrade(ports.http, 'loop.example.com', '/ws');
    expect(loopedUpgrade.status).toBe(508);
    expect(loopedUpgrade.headers['burrow-error-code']).toBe('ERR_BURROW_FORWARD_LOOP');

    // Still serving: the API and the routes made earlier.
    expect((await api.get('/endpoints')).status).toBe(200);
    expect(await get(ports.http, 'app.example.com', '/api/still', keepAlive)).toMatchObject({
      status: 200,
      body: 'api:/api/still',
    });
  });

  it('burrow endpoint create, list and delete', async () => {
    const env = { BURROW_API_URL: server.url, BURROW_API_KEY: api.key };
    await reserve('cli.example.com');
    const policy = JSON.stringify({
      on_http_request: [{ actions: [{ type: 'custom-response', config: { body: 'from cli' } }] }],
    });
    const created = await runBurrow(
      [
        'endpoint',
        'create',
        'https://cli.example.com',
        '--traffic-policy',
        policy,
        '--description',
        'cli',
      ],
      20_000,
      { env },
    );
    expect(created.code, created.stderr).toBe(0);
    const [id, url] = created.stdout.trim().split('\t');
    expect(id).toMatch(/^ep_/);
    expect(url).toBe('https://cli.example.com');
    await until(
      async () => (await get(ports.http, 'cli.example.com', '/', keepAlive)).body === 'from cli',
    );
    const listed = await runBurrow(['endpoint', 'list'], 20_000, { env });
    expect(listed.stdout).toMatch(
      new RegExp(`${id}\tcloud\thttps://cli\\.example\\.com\tpublic\tcli`),
    );
    expect(listed.stdout).toMatch(/\tephemeral\thttps:\/\/api\.internal\tinternal/);
    const bad = await runBurrow(['endpoint', 'create', 'https://nope.example.org'], 20_000, {
      env,
    });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/not reserved.*ERR_NGROK_319/);
    const deleted = await runBurrow(['endpoint', 'delete', id!], 20_000, { env });
    expect(deleted.code, deleted.stderr).toBe(0);
    await until(
      async () => (await get(ports.http, 'cli.example.com', '/', keepAlive)).status === 404,
    );
  });

  it('keeps cloud endpoints across a restart and deletes them', async () => {
    await server.stop(20_000);
    server = await startBurrowServer(db, { args: [...edgeServerArgs(ports), ...tcpPortArgs()] });
    api = new CurlApi(server.url, api.key);
    await until(
      async () =>
        (await get(ports.http, 'down.example.com', '/x', keepAlive).catch(() => ({ body: '' })))
          .body === 'patched',
      15_000,
    );
    const listed = await api.get('/endpoints');
    const down = (listed.body.endpoints as Array<{ id: string; url: string }>).find(
      (e) => e.url === 'https://down.example.com',
    )!;
    expect((await api.delete(`/endpoints/${down.id}`)).status).toBe(204);
    await until(
      async () => (await get(ports.http, 'down.example.com', '/x', keepAlive)).status === 404,
    );
  }, 60_000);
});
