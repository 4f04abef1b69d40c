import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl } from './support/curl.js';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Issue 28: HTTP/2 at the edge. The HTTPS listener offers h2 by ALPN; the same policy, on an
 * endpoint whose service speaks HTTP/1.1, is tried with curl over HTTP/1.1 and over HTTP/2 (one
 * table, two wires), then Node's http2 client: many streams on one connection, an upload, the
 * service's trailers, and a rapid-reset flood that leaves the server serving and its memory back.
 */

const rule = (path: string, actions: object[]) => ({
  expressions: [`req.url.path == '${path}'`],
  actions,
});
const POLICY = {
  on_http_request: [
    rule('/add', [{ type: 'add-headers', config: { headers: { 'x-added': 'yes' } } }]),
    rule('/deny', [{ type: 'deny', config: { status_code: 403 } }]),
    rule('/custom', [
      { type: 'custom-response', config: { status_code: 203, body: 'made at the edge' } },
    ]),
    rule('/old', [{ type: 'url-rewrite', config: { from: '/old', to: '/new' } }]),
    rule('/moved', [{ type: 'redirect', config: { to: '/elsewhere', status_code: 301 } }]),
    rule('/auth', [
      { type: 'basic-auth', config: { credentials: ['ada:lovelace-1843'], realm: 'burrow' } },
    ]),
    rule('/limited', [
      {
        type: 'rate-limit',
        config: {
          name: 'one',
          algorithm: 'sliding_window',
          capacity: 1,
          rate: '60s',
          bucket_key: ['conn.client_ip'],
        },
      },
    ]),
  ],
  on_http_response: [
    {
      expressions: ["req.url.path == '/add'"],
      actions: [{ type: 'add-headers', config: { headers: { 'x-response-added': 'also' } } }],
    },
    {
      // A refusal in the response phase replaces the service's answer with the edge's page.
      expressions: ["req.url.path == '/restricted'"],
      actions: [{ type: 'restrict-ips', config: { deny: ['127.0.0.0/8', '::1/128'] } }],
    },
    {
      expressions: ["req.url.path == '/office'"],
      actions: [{ type: 'restrict-ips', config: { allow: ['127.0.0.0/8', '::1/128'] } }],
    },
  ],
};

/** One request and what must come back, whatever the wire. */
interface Case {
  name: string;
  path: string;
  args?: string[];
  status: number;
  body?: RegExp;
  header?: [string, RegExp];
}
const TABLE: Case[] = [
  { name: 'no rule: the service answers', path: '/plain', status: 200, body: /^GET \/plain/ },
  {
    name: 'add-headers, both phases',
    path: '/add',
    status: 200,
    body: /x-added=yes/,
    header: ['x-response-added', /^also$/],
  },
  {
    name: 'deny, with the page and code',
    path: '/deny',
    status: 403,
    header: ['burrow-error-code', /^ERR_/],
  },
  { name: 'custom-response', path: '/custom', status: 203, body: /^made at the edge$/ },
  { name: 'url-rewrite', path: '/old', status: 200, body: /^GET \/new/ },
  { name: 'redirect', path: '/moved', status: 301, header: ['location', /\/elsewhere$/] },
  {
    name: 'restrict-ips in on_http_response refuses',
    path: '/restricted',
    status: 403,
    body: /Your address may not reach this endpoint/,
    header: ['burrow-error-code', /^ERR_BURROW_IP_RESTRICTED$/],
  },
  {
    name: 'restrict-ips in on_http_response lets in',
    path: '/office',
    status: 200,
    body: /^GET \/office/,
  },
  { name: 'basic-auth refuses', path: '/auth', status: 401, header: ['www-authenticate', /Basic/] },
  { name: 'basic-auth lets in', path: '/auth', args: ['-u', 'ada:lovelace-1843'], status: 200 },
  {
    name: 'an upload',
    path: '/upload',
    args: ['--data-binary', 'x'.repeat(100_000)],
    status: 200,
    body: /^POST \/upload 100000/,
  },
];

describe('HTTP/2 at the edge: the same policy over two wires', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let host = '';
  /** The same policy on an endpoint bound with app protocol http2, before an h2c service. */
  let h2Host = '';
  let h2c: http2.Http2Server;

  const send = (wire: '--http1.1' | '--http2', path: string, args: string[] = [], name = host) =>
    curl([
      `https://${name}:${edge.ports.https}${path}`,
      '--cacert',
      edge.caFile,
      '--resolve',
      `${name}:${edge.ports.https}:127.0.0.1`,
      wire,
      ...args,
    ]);

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    service = await startHttpUpstream((req, res) => {
      let size = 0;
      req.on('data', (c: Buffer) => (size += c.length));
      req.on('end', () => {
        if (req.url === '/trailers') {
          res.writeHead(200, { trailer: 'x-checksum' });
          res.write('body ');
          res.addTrailers({ 'x-checksum': 'abc123' });
          res.end('end');
          return;
        }
        res.end(`${req.method} ${req.url} ${size} x-added=${String(req.headers['x-added'])}`);
      });
    });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const listener = await session
      .httpEndpoint()
      .trafficPolicy(JSON.stringify(POLICY))
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    host = new URL(listener.url()!).hostname;
    // The h2c service answers as the HTTP/1.1 one does, and sends trailers on /trailers.
    h2c = http2.createServer((req, res) => {
      let size = 0;
      req.on('data', (c: Buffer) => (size += c.length));
      req.on('end', () => {
        if (req.url === '/trailers') {
          res.addTrailers({ 'x-checksum': 'abc123' });
          res.end('body end');
          return;
        }
        res.end(`${req.method} ${req.url} ${size} x-added=${String(req.headers['x-added'])}`);
      });
    });
    await new Promise<void>((resolve) => h2c.listen(0, '127.0.0.1', resolve));
    const h2Listener = await session
      .httpEndpoint()
      .appProtocol('http2')
      .trafficPolicy(JSON.stringify(POLICY))
      .listenAndForward(`http://127.0.0.1:${(h2c.address() as AddressInfo).port}`);
    h2Host = new URL(h2Listener.url()!).hostname;
  }, 60_000);

  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    h2c?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  describe.each(['--http1.1', '--http2'] as const)('curl %s', (wire) => {
    it.each(TABLE)('$name', async ({ path, args, status, body, header }) => {
      const reply = await send(wire, path, args);
      expect(reply.status).toBe(status);
      expect(reply.httpVersion).toBe(wire === '--http2' ? '2' : '1.1');
      if (body) expect(reply.text).toMatch(body);
      if (header) expect(reply.headers[header[0]]).toMatch(header[1]);
    });
  });

  describe.each(['--http1.1', '--http2'] as const)(
    'curl %s to an endpoint whose service speaks h2c (app protocol http2)',
    (wire) => {
      it.each(TABLE)('$name', async ({ path, args, status, body, header }) => {
        const reply = await send(wire, path, args, h2Host);
        expect(reply.status).toBe(status);
        expect(reply.httpVersion).toBe(wire === '--http2' ? '2' : '1.1');
        if (body) expect(reply.text).toMatch(body);
        if (header) expect(reply.headers[header[0]]).toMatch(header[1]);
      });
    },
  );

  it('h2c with prior knowledge on the plain HTTP port, policy and all', async () => {
    const at = (path: string, args: string[] = []) =>
      curl([
        `http://${host}:${edge.ports.http}${path}`,
        ...['--resolve', `${host}:${edge.ports.http}:127.0.0.1`, '--http2-prior-knowledge'],
        ...args,
      ]);
    const plain = await at('/plain');
    expect([plain.status, plain.httpVersion]).toEqual([200, '2']);
    expect(plain.text).toMatch(/^GET \/plain/);
    expect((await at('/add')).text).toMatch(/x-added=yes/);
    expect((await at('/deny')).status).toBe(403);
  });

  it('rate-limit counts h2 and HTTP/1.1 requests alike', async () => {
    expect((await send('--http2', '/limited')).status).toBe(200);
    expect((await send('--http1.1', '/limited')).status).toBe(429);
    expect((await send('--http2', '/limited')).status).toBe(429);
  });

  const h2Client = (name = host) =>
    http2.connect(`https://${name}:${edge.ports.https}`, {
      ca: readFileSync(edge.caFile),
      servername: name,
      host: '127.0.0.1',
      port: edge.ports.https,
    } as http2.SecureClientSessionOptions);

  const h2Get = (client: http2.ClientHttp2Session, path: string) =>
    new Promise<{ status: number; body: string; trailers: http2.IncomingHttpHeaders }>(
      (resolve, reject) => {
        const stream = client.request({ ':path': path });
        let status = 0;
        let body = '';
        let trailers: http2.IncomingHttpHeaders = {};
        stream.on('response', (h) => (status = Number(h[':status'])));
        stream.on('trailers', (t) => (trailers = t));
        stream.on('data', (c: Buffer) => (body += c.toString()));
        stream.on('end', () => resolve({ status, body, trailers }));
        stream.on('error', reject);
      },
    );

  it('serves 50 concurrent streams on one connection, each its own answer', async () => {
    const client = h2Client();
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => h2Get(client, `/plain/${i}`)),
    );
    client.close();
    replies.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect(r.body).toMatch(new RegExp(`^GET /plain/${i} `));
    });
  });

  it("passes the service's trailers on as HTTP/2 trailers, from HTTP/1.1 and from h2c", async () => {
    for (const name of [host, h2Host]) {
      const client = h2Client(name);
      const reply = await h2Get(client, '/trailers');
      client.close();
      expect(reply.body).toBe('body end');
      expect(reply.trailers['x-checksum']).toBe('abc123');
    }
  });

  it('survives a rapid-reset flood: 10,000 HEADERS + RST_STREAM on one connection', async () => {
    const pid = edge.server.process.pid!;
    const rss = () =>
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    const before = rss();
    const attacker = h2Client();
    attacker.on('error', () => undefined);
    await new Promise<void>((resolve) => attacker.once('connect', () => resolve()));
    for (let i = 0; i < 10_000 && !attacker.destroyed && !attacker.closed; i++) {
      const stream = attacker.request({ ':path': `/plain/${i}` });
      stream.on('error', () => undefined);
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
    // Another client is served meanwhile, over HTTP/2 and HTTP/1.1.
    const other = h2Client();
    expect((await h2Get(other, '/plain/other')).status).toBe(200);
    other.close();
    expect((await send('--http1.1', '/plain')).status).toBe(200);
    attacker.destroy();
    // Memory comes back to within 64 MB of where it was.
    await expect.poll(() => rss() - before, { timeout: 15_000 }).toBeLessThan(64 * 1024);
  });
});
