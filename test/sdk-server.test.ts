import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BurrowAgentError, connect, type Session } from '../src/sdk/index.js';
import { LocalCa } from '../src/edge/certificates/certificates.js';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { nextEvent, readAll } from './support/mux.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  ingressCurl,
  type EdgePorts,
} from './support/edge-listeners.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';

/**
 * The SDK against a real `burrow server` process (API and edge), with curl and plain sockets as
 * the public clients: the four kinds of endpoint, refusals with their codes, a local service
 * that is down, and a server restart the agent rides out with the same URLs.
 */

const HEARTBEAT = { heartbeatInterval: 1000, heartbeatTolerance: 2000 };

describe.each(DATABASE_KINDS)('the SDK against burrow server (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  let web: LocalServer;
  let echo: LocalServer;
  const sessions: Session[] = [];

  const start = async (): Promise<BurrowServer> => {
    const s = await startBurrowServer(db, { args: edgeServerArgs(ports) });
    api = new CurlApi(s.url, api?.key ?? (await createApiKey(db)));
    return s;
  };
  const token = (body: object = {}): Promise<string> => createAuthtoken(api, body);
  const open = async (authtoken?: string): Promise<Session> => {
    const session = await connect({
      serverAddr: `127.0.0.1:${ports.agent}`,
      authtoken: authtoken ?? (await token()),
      ca: caFile,
      reconnect: { initialDelay: 100, maxDelay: 1000 },
      ...HEARTBEAT,
    });
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
    caFile = join(db.dataDir, 'ca.pem');
    server = await start();
    web = await startHttpUpstream((req, res) => res.end(`hello from ${req.url}`));
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
  }, 60_000);
  afterAll(async () => {
    for (const s of sessions) await s.close();
    await web?.close();
    await echo?.close();
    await server?.stop();
    await db?.drop();
  });

  it('serves HTTP, TCP and TLS endpoints to public clients', async () => {
    const session = await open();
    const http = await session.httpEndpoint({ forward: web.port });
    expect(http.url).toBe(`https://${new URL(http.url!).hostname}:${ports.https}`);
    expect(await curlUrl(http.url!, '/hi')).toMatchObject({ status: 200, text: 'hello from /hi' });

    const tcp = await session.tcpEndpoint({ forward: echo.port });
    const client = net.connect({
      port: Number(new URL(tcp.url!).port),
      host: '127.0.0.1',
      allowHalfOpen: true,
    });
    await once(client, 'connect');
    client.end('echo me');
    expect(String(await readAll(client))).toBe('echo me');

    const tlsEndpoint = await session.tlsEndpoint();
    const name = new URL(tlsEndpoint.url!).hostname;
    const leaf = await (await LocalCa.loadOrCreate(db.dataDir)).issue([name]);
    const local = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) =>
      s.end('tls ok'),
    );
    local.listen(0, '127.0.0.1');
    await once(local, 'listening');
    tlsEndpoint.forward((local.address() as net.AddressInfo).port);
    const secure = tls.connect({
      port: ports.https,
      host: '127.0.0.1',
      servername: name,
      ca: readFileSync(caFile),
    });
    await once(secure, 'secureConnect');
    expect(secure.getPeerCertificate().fingerprint256).toBe(
      new X509Certificate(leaf.certPem).fingerprint256,
    );
    expect(String(await readAll(secure))).toBe('tls ok');
    local.close();

    const listed = await api.get('/tunnels');
    const urls = (listed.body.tunnels as Array<{ public_url?: string }>).map((t) => t.public_url);
    expect(urls).toEqual(expect.arrayContaining([http.url, tcp.url, tlsEndpoint.url]));
  });

  it('starts a labeled tunnel that the tunnel-group backend with its labels lists', async () => {
    const backend = await api.post('/backends/tunnel_group', { labels: { app: `sdk-${kind}` } });
    expect(backend.status).toBe(201);
    const session = await open(await token({ acl: [`bind:app=sdk-${kind}`] }));
    const labeled = await session.labeledTunnel({
      labels: { app: `sdk-${kind}` },
      forward: web.port,
    });
    const tunnel = await api.get(`/tunnels/${labeled.id}`);
    expect(tunnel.status).toBe(200);
    expect(tunnel.body).toMatchObject({
      labels: { app: `sdk-${kind}` },
      backends: [{ id: backend.body.id }],
      forwards_to: `localhost:${web.port}`,
    });
  });

  it('surfaces the server refusals with their codes', async () => {
    const err = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e as BurrowAgentError,
      );
    const base = { serverAddr: `127.0.0.1:${ports.agent}`, ca: caFile, reconnect: false } as const;
    expect(await err(connect({ ...base, authtoken: 'not-a-token' }))).toMatchObject({
      code: 'ERR_NGROK_105',
    });
    const revoked = await api.post('/credentials', {});
    expect((await api.delete(`/credentials/${revoked.body.id}`)).status).toBe(204);
    expect(await err(connect({ ...base, authtoken: revoked.body.token }))).toMatchObject({
      code: 'ERR_NGROK_107',
    });

    const confined = await open(await token({ acl: ['bind:*.mine.example.com'] }));
    const acl = await err(confined.httpEndpoint({ domain: 'other.example.com' }));
    expect(acl).toBeInstanceOf(BurrowAgentError);
    expect(acl).toMatchObject({ code: 'ERR_NGROK_316' });
    const open1 = await open();
    expect(await err(open1.httpEndpoint({ domain: 'unreserved.example.org' }))).toMatchObject({
      code: 'ERR_NGROK_319',
      message: expect.stringContaining("reserve the name 'unreserved.example.org'") as string,
    });
  });

  it('answers 502 at once when the local service is down', async () => {
    const session = await open();
    const endpoint = await session.httpEndpoint({ forward: await freePort() });
    const started = Date.now();
    const reply = await curlUrl(endpoint.url!, '/down', ['--max-time', '5']);
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_8012');
    expect(reply.text).toMatch(
      /could not connect to the service at localhost:\d+ \(ECONNREFUSED\)/,
    );
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('rides out a server restart: back with the same URLs within the heartbeat tolerance', async () => {
    const session = await open();
    const http = await session.httpEndpoint({ forward: web.port });
    const tcp = await session.tcpEndpoint({ forward: echo.port });
    const urls = [http.url, tcp.url];
    const lost = nextEvent(session, 'disconnected', 15_000);
    await server.stop();
    await lost;
    server = await start();
    const upAt = Date.now();
    await nextEvent(session, 'connected', 15_000);
    expect(Date.now() - upAt).toBeLessThan(
      HEARTBEAT.heartbeatInterval + HEARTBEAT.heartbeatTolerance,
    );
    expect([http.url, tcp.url]).toEqual(urls);
    expect(await curlUrl(http.url!, '/back')).toMatchObject({
      status: 200,
      text: 'hello from /back',
    });
    const listed = await api.get('/tunnels');
    const online = (listed.body.tunnels as Array<{ public_url?: string }>).map((t) => t.public_url);
    expect(online).toEqual(expect.arrayContaining(urls));
  });
});
