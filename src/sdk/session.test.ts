import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../edge/certificates/certificates.js';
import { readAll } from '../../test/support/mux.js';
import {
  freePort,
  httpRequest,
  startHttpUpstream,
  startTcpUpstream,
  type LocalServer,
} from '../../test/support/ingress.js';
import { startSdkTestEdge, type SdkTestEdge } from '../../test/support/sdk-edge.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import {
  connect,
  type ConnectOptions,
  type Endpoint,
  type HttpExchange,
  type Session,
} from './index.js';

/** The SDK against a real in-process edge (agent listener + public ingress) on real sockets. */

function hostOf(url: string | undefined): string {
  return new URL(url!).hostname;
}

function portOfUrl(url: string | undefined): number {
  return Number(new URL(url!).port);
}

/** GET through the edge's HTTPS port with SNI, trusting the edge CA. */
function httpsGet(
  port: number,
  host: string,
  ca: string,
  path = '/',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        servername: host,
        headers: { Host: host },
        ca,
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe.each(DATABASE_KINDS)('the SDK against an in-process edge (%s)', (kind) => {
  let edge: SdkTestEdge;
  let upstream: LocalServer;
  let echo: LocalServer;
  const sessions: Session[] = [];

  const open = async (extra: Partial<ConnectOptions> = {}): Promise<Session> => {
    const session = await connect({
      serverAddr: edge.serverAddr,
      authtoken: await edge.token(),
      ca: edge.caFile,
      ...extra,
    });
    sessions.push(session);
    return session;
  };
  const get = (endpoint: Endpoint, path = '/', headers: Record<string, string> = {}) =>
    httpRequest(edge.httpPort, { host: hostOf(endpoint.url), path, headers });

  beforeAll(async () => {
    edge = await startSdkTestEdge(kind);
    upstream = await startHttpUpstream((req, res) => {
      if (req.url === '/upload') {
        let bytes = 0;
        req.on('data', (c: Buffer) => (bytes += c.length));
        req.on('end', () => res.end(`got ${bytes}`));
        return;
      }
      res.setHeader('X-Client', String(req.headers['x-forwarded-for']));
      res.end(`hello from ${req.url}`);
    });
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
  });
  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.close();
  });
  afterAll(async () => {
    await upstream.close();
    await echo.close();
    await edge.close();
  });

  it('serves an HTTP endpoint on a random URL, over HTTP and HTTPS, and logs each request', async () => {
    const session = await open();
    const endpoint = await session.httpEndpoint({ forward: `localhost:${upstream.port}` });
    expect(endpoint.url).toMatch(/^https:\/\/[a-z0-9]{10}\.burrow\.test:8443$/);
    expect(endpoint.proto).toBe('https');
    expect(endpoint.forwardsTo).toBe(`localhost:${upstream.port}`);
    const log: HttpExchange[] = [];
    endpoint.on('request', (x) => log.push(x));

    const plain = await get(endpoint, '/hello?x=1');
    expect(plain).toMatchObject({ status: 200, body: 'hello from /hello?x=1' });
    expect(plain.headers['x-client']).toBe('127.0.0.1');
    const secure = await httpsGet(edge.httpsPort, hostOf(endpoint.url), edge.caPem, '/tls');
    expect(secure).toEqual({ status: 200, body: 'hello from /tls' });

    expect(log.map((x) => [x.method, x.path, x.status])).toEqual([
      ['GET', '/hello?x=1', 200],
      ['GET', '/tls', 200],
    ]);
    expect(log[0]!.durationMs).toBeGreaterThan(0);
    expect(log[0]!.clientAddr).toMatch(/^127\.0\.0\.1:\d+$/);
    const tunnel = edge.registry.listTunnels().find((t) => t.url === endpoint.url)!;
    expect(tunnel.forwardsTo).toBe(`localhost:${upstream.port}`);
    expect(edge.registry.session(tunnel.sessionId)!.transport).toBe('burrow/1');
  });

  it('streams large request bodies intact', async () => {
    const session = await open();
    const endpoint = await session.httpEndpoint({ forward: upstream.port });
    const body = Buffer.alloc(8 * 1024 * 1024, 7);
    const reply = await httpRequest(edge.httpPort, {
      host: hostOf(endpoint.url),
      path: '/upload',
      method: 'POST',
      body,
    });
    expect(reply).toMatchObject({ status: 200, body: `got ${body.length}` });
  });

  it('binds with the standard window when asked, which the edge shows as ngrok/2', async () => {
    const session = await open({ window: 'standard' });
    const endpoint = await session.httpEndpoint({ forward: upstream.port });
    expect((await get(endpoint, '/w')).body).toBe('hello from /w');
    const tunnel = edge.registry.listTunnels().find((t) => t.url === endpoint.url)!;
    expect(edge.registry.session(tunnel.sessionId)!.transport).toBe('ngrok/2');
  });

  it('serves a TCP endpoint with half-close in both directions', async () => {
    const session = await open();
    const endpoint = await session.tcpEndpoint({ forward: `127.0.0.1:${echo.port}` });
    expect(endpoint.url).toMatch(/^tcp:\/\/tcp\.burrow\.test:20\d{3}$/);
    const port = portOfUrl(endpoint.url);
    await edge.ingress.tcp.listening(port);
    const client = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    client.end('ping over tcp');
    expect(String(await readAll(client))).toBe('ping over tcp');
    client.destroy();
  });

  it('passes TLS through to the local TLS service', async () => {
    const session = await open();
    const endpoint = await session.tlsEndpoint();
    const name = hostOf(endpoint.url);
    expect(endpoint.url).toMatch(/^tls:\/\/[a-z0-9]{10}\.burrow\.test:8443$/);
    const ca = await LocalCa.loadOrCreate(edge.db.dataDir);
    const leaf = await ca.issue([name]);
    const local = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) =>
      s.end(`secret for ${s.servername}`),
    );
    local.listen(0, '127.0.0.1');
    await once(local, 'listening');
    endpoint.forward((local.address() as net.AddressInfo).port);
    const client = tls.connect({
      port: edge.httpsPort,
      host: '127.0.0.1',
      servername: name,
      ca: edge.caPem,
    });
    await once(client, 'secureConnect');
    // The certificate is the local service's own: the edge passed TLS through untouched.
    expect(client.getPeerCertificate().fingerprint256).toBe(
      new X509Certificate(leaf.certPem).fingerprint256,
    );
    expect(String(await readAll(client))).toBe(`secret for ${name}`);
    client.destroy();
    local.close();
  });

  it('starts labeled tunnels and forwards what the edge routes to them', async () => {
    const session = await open({ authtoken: await edge.token({ acl: ['bind:app=*'] }) });
    const tunnel = await session.labeledTunnel({
      labels: { app: `web-${kind}` },
      forward: (req, res) => res.end(`labeled ${req.url}`),
    });
    expect(tunnel.url).toBeUndefined();
    const [online] = edge.registry.matchingLabels({ app: `web-${kind}` });
    expect(online).toMatchObject({ bindId: tunnel.id, labels: { app: `web-${kind}` } });
    const stream = await online!.connect({
      clientAddr: '203.0.113.9:40000',
      proto: 'https',
      edgeType: '3',
      passthroughTls: false,
    });
    stream.end('GET /via-edge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(String(await readAll(stream))).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*labeled \/via-edge$/);
  });

  it('forwards to a Node http.Server that is not listening, and to a handler function', async () => {
    const session = await open();
    const server = http.createServer((req, res) =>
      res.end(`server saw ${req.socket.remoteAddress} ${String(req.headers['x-forwarded-proto'])}`),
    );
    const viaServer = await session.httpEndpoint({ forward: server });
    expect(viaServer.forwardsTo).toBe('http.Server');
    const log: HttpExchange[] = [];
    viaServer.on('request', (x) => log.push(x));
    expect((await get(viaServer)).body).toBe('server saw 127.0.0.1 http');
    expect(log).toMatchObject([{ method: 'GET', path: '/', status: 200 }]);

    const viaHandler = await session.httpEndpoint();
    viaHandler.forward((req, res) => {
      res.writeHead(201, { 'Content-Type': 'text/plain' });
      res.end(`handled ${req.method} ${req.url}`);
    });
    const reply = await httpRequest(edge.httpPort, {
      host: hostOf(viaHandler.url),
      path: '/h',
      method: 'PUT',
      body: 'x',
    });
    expect(reply).toMatchObject({ status: 201, body: 'handled PUT /h' });
  });

  it('answers 502 at once when the local HTTP service is down, and resets TCP connections', async () => {
    const session = await open();
    const dead = await freePort();
    const web = await session.httpEndpoint({ forward: dead });
    const failures: string[] = [];
    web.on('forward-error', (err) => failures.push(`${err.code} ${err.message}`));
    const log: HttpExchange[] = [];
    web.on('request', (x) => log.push(x));
    const started = Date.now();
    const reply = await get(web, '/down', { Accept: 'text/html' });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_8012');
    expect(reply.body).toContain(`localhost:${dead}`);
    expect(reply.body).toContain('<h1>Bad gateway</h1>');
    expect(failures).toEqual([expect.stringMatching(/^ERR_NGROK_8012 cannot reach localhost:\d+/)]);
    expect(log).toMatchObject([{ method: 'GET', path: '/down', status: 502 }]);
    // The service comes back: the same endpoint serves it.
    const back = await startHttpUpstream((_req, res) => res.end('back'));
    web.forward(back.port);
    expect((await get(web)).body).toBe('back');
    await back.close();

    const tcp = await session.tcpEndpoint({ forward: dead });
    await edge.ingress.tcp.listening(portOfUrl(tcp.url));
    const client = net.connect(portOfUrl(tcp.url), '127.0.0.1');
    client.on('error', () => undefined);
    client.resume();
    await once(client, 'close');
  });

  it('does not hang when the service closes an idle keep-alive connection the edge reuses', async () => {
    const session = await open();
    const quick = await startHttpUpstream(
      (req, res) => res.end(`quick ${req.url}`),
      (server) => (server.keepAliveTimeout = 100),
    );
    const endpoint = await session.httpEndpoint({ forward: quick.port });
    const connections: string[] = [];
    endpoint.on('connection', (c) => connections.push(c.clientAddr));
    expect((await get(endpoint, '/1')).body).toBe('quick /1');
    // Node closes idle connections keepAliveTimeout + 1 s after the last response.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const started = Date.now();
    expect((await get(endpoint, '/2')).body).toBe('quick /2');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(connections).toHaveLength(2);
    await quick.close();
  });

  it('close() unbinds: the public gets 404 and the registry forgets the tunnel', async () => {
    const session = await open();
    const endpoint = await session.httpEndpoint({ forward: upstream.port });
    expect((await get(endpoint)).status).toBe(200);
    const closed = once(endpoint, 'close');
    await endpoint.close();
    expect(await closed).toEqual([undefined]);
    expect(endpoint.closed).toBe(true);
    const after = await get(endpoint);
    expect(after.status).toBe(404);
    expect(after.headers['burrow-error-code']).toBe('ERR_NGROK_3200');
    expect(edge.registry.listTunnels().some((t) => t.url === endpoint.url)).toBe(false);
    expect(session.endpoints).toEqual([]);
  });

  it('queues connections that arrive before forward() and hands them over', async () => {
    const session = await open();
    const endpoint = await session.httpEndpoint();
    const pending = get(endpoint, '/early');
    await new Promise((resolve) => setTimeout(resolve, 100));
    endpoint.forward(upstream.port);
    expect((await pending).body).toBe('hello from /early');
  });
});
