import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../src/edge/certificates/certificates.js';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { readAll, until } from './support/mux.js';
import { startRelay, type Relay } from './support/sdk-edge.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { curl, CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  ingressCurl,
  type EdgePorts,
  hostGet,
} from './support/edge-listeners.js';
import { refusalOf, spawnNgrokAgent, ngrokSession } from './support/ngrok-agents.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';

/**
 * The unmodified @ngrok/ngrok package (ngrok-rust inside) against a real `burrow server` process
 * with its edge listeners, and curl, Node and raw sockets as the public clients: the four kinds of
 * endpoint, a reconnect over a cut TCP connection, refusals with their codes, keep-alive through
 * the tunnel, metrics, logs, error pages, an agent killed mid-request and a SIGTERM drain.
 */

/** One GET on 127.0.0.1:`port` with a Host header, through `agent`; says whether it reused a connection. */
async function get(port: number, host: string, path: string, agent: http.Agent | false = false) {
  const { status, body, reused, ms } = await hostGet(port, host, path, agent);
  return { status, body, reused, ms };
}

/** The value of one series in a Prometheus text exposition (undefined when absent). */
function metric(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe.each(DATABASE_KINDS)('@ngrok/ngrok against a burrow server process (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  let caPem: string;
  let web: LocalServer;
  let echo: LocalServer;
  let relay: Relay | undefined;
  const sessions: ngrok.Session[] = [];
  const tokens: string[] = [];

  const token = async (body: object = {}): Promise<string> => {
    const created = await createAuthtoken(api, body);
    tokens.push(created);
    return created;
  };
  const builder = (authtoken: string, serverAddr = `127.0.0.1:${ports.agent}`) =>
    ngrokSession(serverAddr, caPem, authtoken);
  const connect = async (authtoken?: string, serverAddr?: string): Promise<ngrok.Session> => {
    const session = await builder(authtoken ?? (await token()), serverAddr).connect();
    sessions.push(session);
    return session;
  };
  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    ports = await freeEdgePorts();
    server = await startBurrowServer(db, {
      args: [...edgeServerArgs(ports), '--log-level', 'debug'],
    });
    api = new CurlApi(server.url, await createApiKey(db));
    caFile = join(db.dataDir, 'ca.pem');
    caPem = readFileSync(caFile, 'utf8');
    web = await startHttpUpstream(
      (req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        const delay = Number(url.searchParams.get('ms') ?? 0);
        setTimeout(() => res.end(`hello from ${url.pathname}`), delay);
      },
      // Node's default idle timeout is 5 s; shorter makes the stale-stream case quick to hit.
      (s) => (s.keepAliveTimeout = 1000),
    );
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await relay?.close();
    await web?.close();
    await echo?.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it('forwards HTTP and HTTPS to a local service', async () => {
    const session = await connect();
    const secure = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    expect(secure.url()).toMatch(
      new RegExp(`^https://[a-z0-9]{10}\\.burrow\\.test:${ports.https}$`),
    );
    const overTls = await curlUrl(secure.url()!, '/secure');
    expect(overTls).toMatchObject({ status: 200, text: 'hello from /secure' });

    const plain = await session
      .httpEndpoint()
      .scheme('HTTP')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    expect(plain.url()).toMatch(new RegExp(`^http://[a-z0-9]{10}\\.burrow\\.test:${ports.http}$`));
    expect(await curlUrl(plain.url()!, '/plain')).toMatchObject({
      status: 200,
      text: 'hello from /plain',
    });
  });

  it('forwards TCP to a local service', async () => {
    const session = await connect();
    const listener = await session.tcpEndpoint().listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const { hostname, port } = new URL(listener.url()!);
    expect(hostname).toBe('tcp.burrow.test');
    const client = net.connect({ port: Number(port), host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    client.end('echo through ngrok');
    expect(String(await readAll(client))).toBe('echo through ngrok');
  });

  it('passes TLS through by SNI: the public client sees the local service certificate', async () => {
    const session = await connect();
    const listener = await session.tlsEndpoint().listen();
    const name = new URL(listener.url()!).hostname;
    const leaf = await (await LocalCa.loadOrCreate(db.dataDir)).issue([name]);
    const local = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) => {
      s.once('data', (d: Buffer) => s.end(`tls ok: ${String(d)}`));
    });
    local.listen(0, '127.0.0.1');
    await once(local, 'listening');
    const localPort = (local.address() as net.AddressInfo).port;
    // The agent pipes the still-encrypted bytes to the service, which ends the TLS itself.
    void listener.forward(`tcp://127.0.0.1:${localPort}`).catch(() => undefined);
    const client = tls.connect({
      port: ports.https,
      host: '127.0.0.1',
      servername: name,
      ca: caPem,
    });
    await once(client, 'secureConnect');
    expect(client.getPeerCertificate().fingerprint256).toBe(
      new X509Certificate(leaf.certPem).fingerprint256,
    );
    client.write('ping');
    expect(String(await readAll(client))).toBe('tls ok: ping');
    local.close();
  });

  it('reconnects with the same URLs after its TCP connection to the edge is cut', async () => {
    relay = await startRelay(`127.0.0.1:${ports.agent}`);
    const session = await connect(undefined, relay.addr);
    const web1 = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const tcp1 = await session.tcpEndpoint().listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const online = async () => {
      const listed = await api.get('/tunnels');
      const tunnels = listed.body.tunnels as {
        public_url?: string;
        tunnel_session: { id: string };
      }[];
      return new Map(tunnels.map((t) => [t.public_url, t.tunnel_session.id]));
    };
    const before = (await online()).get(web1.url()!);
    expect(before).toMatch(/^ts_/);
    // A slow request in flight when the connection drops fails at once, not after a timeout.
    const started = Date.now();
    const inFlight = curlUrl(web1.url()!, '/slow?ms=3000');
    await new Promise((resolve) => setTimeout(resolve, 300));
    relay.cut();
    expect((await inFlight).status).toBe(502);
    expect(Date.now() - started).toBeLessThan(2000);

    let after: Map<string | undefined, string> = new Map();
    await until(() => relay!.accepted >= 2, 15_000);
    for (let i = 0; i < 100; i++) {
      after = await online();
      const id = after.get(web1.url()!);
      if (id !== undefined && id !== before && after.get(tcp1.url()!) === id) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(after.get(web1.url()!)).not.toBe(before);
    expect(after.get(tcp1.url()!)).toBe(after.get(web1.url()!));
    expect(await curlUrl(web1.url()!, '/again')).toMatchObject({
      status: 200,
      text: 'hello from /again',
    });
    expect((await api.get(`/tunnel_sessions/${before}`)).status).toBe(404);
  });

  it('refuses with the errorCode of each case', async () => {
    expect((await refusalOf(builder('not-a-token').connect())).errorCode).toBe('ERR_NGROK_105');
    const revoked = await api.post('/credentials', {});
    tokens.push(revoked.body.token as string);
    expect((await api.delete(`/credentials/${revoked.body.id}`)).status).toBe(204);
    expect((await refusalOf(builder(revoked.body.token as string).connect())).errorCode).toBe(
      'ERR_NGROK_107',
    );
    const bot = await api.post('/bot_users', { name: `inactive-${kind}`, active: false });
    expect(bot.status, bot.text).toBe(201);
    const inactive = await refusalOf(builder(await token({ owner_id: bot.body.id })).connect());
    expect(inactive.errorCode).toBe('ERR_NGROK_636');

    const confined = await connect(await token({ acl: ['bind:*.mine.example.com'] }));
    const acl = await refusalOf(confined.httpEndpoint().domain('other.example.com').listen());
    expect(acl.errorCode).toBe('ERR_NGROK_316');
    const open = await connect();
    const notReserved = await refusalOf(open.httpEndpoint().domain('free.example.org').listen());
    expect(notReserved.errorCode).toBe('ERR_NGROK_319');
    expect(notReserved.message).toContain('free.example.org');
  });

  it('keeps a public keep-alive connection working after the service closed its idle side', async () => {
    const session = await connect();
    const listener = await session
      .httpEndpoint()
      .scheme('HTTP')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    const host = new URL(listener.url()!).hostname;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await get(ports.http, host, '/first', agent);
    expect(first).toMatchObject({ status: 200, body: 'hello from /first', reused: false });
    // The service (keepAliveTimeout 1 s) closes its idle connection; ngrok ends the stream.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const second = await get(ports.http, host, '/second', agent);
    expect(second).toMatchObject({ status: 200, body: 'hello from /second', reused: true });
    expect(second.ms).toBeLessThan(1000);
    agent.destroy();
  });

  it('serves /metrics with sessions, tunnels, connections, bytes and requests by endpoint', async () => {
    const session = await connect();
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const endpoint = listener.url()!;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 3; i++) {
      expect((await get(ports.http, new URL(endpoint).hostname, '/m', agent)).status).toBe(200);
    }
    agent.destroy();
    const text = (await curl([`${server.url}/metrics`])).text;
    expect(metric(text, 'burrow_agent_sessions')).toBeGreaterThanOrEqual(1);
    expect(metric(text, 'burrow_tunnels{proto="https"}')).toBeGreaterThanOrEqual(1);
    expect(metric(text, 'burrow_tunnels{proto="tcp"}')).toBeGreaterThanOrEqual(1);
    const label = `endpoint="${endpoint}"`;
    expect(metric(text, `burrow_http_requests_total{${label},code="200"}`)).toBe(3);
    expect(metric(text, `burrow_connections_total{${label}}`)).toBe(1);
    expect(metric(text, `burrow_bytes_received_total{${label}}`)).toBeGreaterThan(3 * 40);
    expect(metric(text, `burrow_bytes_sent_total{${label}}`)).toBeGreaterThan(3 * 60);
    expect(metric(text, 'burrow_http_requests_total{endpoint="none",code="404"}')).toBeUndefined();
  });

  it('answers an unknown host with the 404 page, over HTTP and HTTPS', async () => {
    const plain = await curl([
      `http://nobody.burrow.test:${ports.http}/`,
      '--connect-to',
      `nobody.burrow.test:${ports.http}:127.0.0.1:${ports.http}`,
    ]);
    expect(plain.status).toBe(404);
    expect(plain.headers['burrow-error-code']).toBe('ERR_NGROK_3200');
    expect(plain.text).toContain('No tunnel is online for nobody.burrow.test');
    const secure = await curlUrl(`https://gone.burrow.test:${ports.https}`, '/', [
      '-H',
      'Accept: text/html',
    ]);
    expect(secure.status).toBe(404);
    expect(secure.headers['content-type']).toMatch(/^text\/html/);
    expect(secure.text).toContain('Tunnel not found');
    const text = (await curl([`${server.url}/metrics`])).text;
    expect(metric(text, 'burrow_http_requests_total{endpoint="none",code="404"}')).toBe(2);
  });

  it('answers 502 at once when the agent dies mid-request, then 404', async () => {
    const agent = await spawnNgrokAgent({
      addr: `127.0.0.1:${ports.agent}`,
      ca: caPem,
      token: await token(),
      to: `http://127.0.0.1:${web.port}`,
    });
    try {
      expect(await curlUrl(agent.url, '/alive')).toMatchObject({ status: 200 });
      const inFlight = curlUrl(agent.url, '/slow?ms=5000');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const killedAt = Date.now();
      agent.child.kill('SIGKILL');
      const reply = await inFlight;
      expect(reply.status).toBe(502);
      expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_3004');
      expect(Date.now() - killedAt).toBeLessThan(1000);
      const after = await curlUrl(agent.url, '/after');
      expect(after.status).toBe(404);
      expect(Date.now() - killedAt).toBeLessThan(1500);
    } finally {
      agent.child.kill('SIGKILL');
    }
  });

  it('never writes an authtoken to its logs', async () => {
    // Every token of this file has been used by now, accepted or refused, at debug level.
    expect(tokens.length).toBeGreaterThan(5);
    expect(
      server.logs.some((l) => l.msg === 'agent session ended' || l.msg === 'closing agent session'),
    ).toBe(true);
    const out = server.stdout() + server.stderr();
    expect(out).not.toContain(api.key);
    for (const t of tokens) {
      expect(out).not.toContain(t);
      // Nor the secret half on its own.
      expect(out).not.toContain(t.slice(t.indexOf('_') + 1));
    }
  });

  it('drains on SIGTERM: new connections refused, the request in flight finishes, exit 0', async () => {
    const session = await connect();
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const started = Date.now();
    const inFlight = curlUrl(listener.url()!, '/slow?ms=1500');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exit = server.stop(20_000);
    // The listeners close first; connecting now is refused.
    let refused = false;
    for (let i = 0; i < 40 && !refused; i++) {
      refused = await new Promise<boolean>((resolve) => {
        const probe = net.connect(ports.http, '127.0.0.1');
        probe.once('connect', () => {
          probe.destroy();
          resolve(false);
        });
        probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
      });
      if (!refused) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(refused).toBe(true);
    expect(await inFlight).toMatchObject({ status: 200, text: 'hello from /slow' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(await exit).toBe(0);
    expect(server.logs.map((l) => l.msg)).toContain('shutting down');
  });
});
