/**
 * HTTP/2 requests on the lean relay's pipeline (h2-exchange.ts), over real sockets: Node's http2
 * client against the ingress's HTTPS listener, real HTTP/1.1 services behind fake tunnels. Many
 * streams at once on one connection, bodies with and without a length, a chunked answer decoded
 * with its trailers, tunnel streams kept between requests, a client's reset releasing its stream
 * (counted on the lean path), the edge's own pages and the policy's answers.
 */
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  metricValue,
  startHttpUpstream,
  startTcpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { until } from '../../../../test/support/mux.js';
import { configureEgress, parseEgressAllow } from '../../../core/egress-guard.js';

const POLICY = `
on_http_request:
  - expressions: ["req.url.path == '/deny'"]
    actions: [{type: deny}]
  - actions: [{type: add-headers, config: {headers: {x-added: "yes", x-version: "\${req.version}"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-served-by: burrow}}}]
`;

let t: TestIngress;
let endpoints: PolicyEndpoints;
/**
 * `/echo` answers the method, target, x-added and body it got, with a length; `/chunked` answers
 * in chunks with a trailer; `/big` 8 MiB chunked; `/slow` never answers.
 */
let service: LocalServer;

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  service = await startHttpUpstream((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/slow') return;
    if (req.url === '/big') {
      // 8 MiB in 64 KiB chunks: more than any window, so back-pressure must hold on both sides.
      const piece = Buffer.alloc(64 * 1024, 0x61);
      let left = 128;
      const more = (): void => {
        while (left > 0) {
          left--;
          if (!res.write(piece)) {
            res.once('drain', more);
            return;
          }
        }
        res.end();
      };
      more();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      if (req.url === '/chunked') {
        res.writeHead(200, { Trailer: 'x-checksum' });
        res.write('part one, ');
        res.write('part two');
        res.addTrailers({ 'x-checksum': 'abc123' });
        res.end();
        return;
      }
      const added = req.headers['x-added'] ?? '-';
      const version = req.headers['x-version'] ?? '-';
      const text = `${req.method} ${req.url} ${String(added)} ${body}`;
      res.setHeader('X-Seen-Version', version);
      res.setHeader('Content-Length', Buffer.byteLength(text));
      res.setHeader('Set-Cookie', ['a=1', 'b=2']);
      res.end(text);
    });
  });
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await service.close();
});

interface H2Reply {
  headers: IncomingHttpHeaders;
  body: string;
  trailers: IncomingHttpHeaders;
}

function connect(host: string): ClientHttp2Session {
  return http2.connect(`https://127.0.0.1:${t.httpsPort}`, { ca: t.ca.certPem, servername: host });
}

function request(
  session: ClientHttp2Session,
  host: string,
  path: string,
  options: { method?: string; body?: string; length?: boolean } = {},
): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      ':method': options.method ?? 'GET',
      ':path': path,
      ':authority': host,
    };
    if (options.body !== undefined && options.length) {
      headers['content-length'] = String(Buffer.byteLength(options.body));
    }
    const stream = session.request(headers, { endStream: options.body === undefined });
    let replyHeaders: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    let body = '';
    stream.on('response', (h) => (replyHeaders = h));
    stream.on('trailers', (h) => (trailers = h));
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (body += d));
    stream.on('end', () => resolve({ headers: replyHeaders, body, trailers }));
    stream.on('error', reject);
    if (options.body !== undefined) stream.end(options.body);
  });
}

describe('HTTP/2 on the lean pipeline', () => {
  it('carries many streams of one connection at once, through the policy', async () => {
    const tunnel = endpoints.publicEndpoint('http', service.port, POLICY);
    const host = tunnel.hostname!;
    const session = connect(host);
    try {
      const paths = Array.from({ length: 20 }, (_, i) => `/echo?n=${i}`);
      const replies = await Promise.all(paths.map((p) => request(session, host, p)));
      replies.forEach((reply, i) => {
        expect(reply.headers[':status']).toBe(200);
        expect(reply.body).toBe(`GET ${paths[i]} yes `);
        expect(reply.headers['x-served-by']).toBe('burrow');
        // The policy sees the version the client spoke.
        expect(reply.headers['x-seen-version']).toBe('2.0');
        expect(reply.headers['set-cookie']).toEqual(['a=1', 'b=2']);
      });
      // Streams are kept between requests: the next ones open no new one.
      const opened = tunnel.connects.length;
      expect(opened).toBeLessThanOrEqual(20);
      for (const p of ['/echo?again=1', '/echo?again=2']) {
        expect((await request(session, host, p)).body).toBe(`GET ${p} yes `);
      }
      expect(tunnel.connects.length).toBe(opened);
    } finally {
      session.close();
    }
  });

  it('sends bodies with and without a length, and answers the policy itself', async () => {
    const host = endpoints.publicEndpoint('http', service.port, POLICY).hostname!;
    const session = connect(host);
    try {
      const big = 'x'.repeat(200_000);
      const sized = await request(session, host, '/echo', {
        method: 'POST',
        body: big,
        length: true,
      });
      expect(sized.body).toBe(`POST /echo yes ${big}`);
      const unsized = await request(session, host, '/echo', { method: 'PUT', body: 'no length' });
      expect(unsized.body).toBe('PUT /echo yes no length');
      const denied = await request(session, host, '/deny');
      expect(denied.headers[':status']).toBe(403);
      expect(denied.headers['burrow-error-code']).toMatch(/^ERR_/);
    } finally {
      session.close();
    }
  });

  it('lets on_http_response replace the answer (custom-response), the connection serving on', async () => {
    const policy = `
on_http_response:
  - expressions: ["req.url.path == '/replace'"]
    actions: [{type: custom-response, config: {status_code: 503, body: "replaced"}}]
`;
    const host = endpoints.publicEndpoint('http', service.port, policy).hostname!;
    const session = connect(host);
    try {
      const replaced = await request(session, host, '/replace');
      expect([replaced.headers[':status'], replaced.body]).toEqual([503, 'replaced']);
      const next = await request(session, host, '/echo');
      expect([next.headers[':status'], next.body]).toEqual([200, 'GET /echo - ']);
    } finally {
      session.close();
    }
  });

  it('holds the answer while on_http_response waits for an http-request call', async () => {
    const checks = await startHttpUpstream((_req: IncomingMessage, res: ServerResponse) => {
      setTimeout(() => res.end('checked'), 20);
    });
    const entry = parseEgressAllow('127.0.0.1');
    if ('problem' in entry) throw new Error(entry.problem);
    configureEgress({ allow: [entry] });
    const policy = `
on_http_response:
  - actions:
      - {type: http-request, config: {url: "http://127.0.0.1:${checks.port}/"}}
      - {type: add-headers, config: {headers: {x-checked: "\${actions.ngrok.http_request.res.body}"}}}
`;
    const host = endpoints.publicEndpoint('http', service.port, policy).hostname!;
    const session = connect(host);
    try {
      const replies = await Promise.all([
        request(session, host, '/echo'),
        request(session, host, '/big'),
      ]);
      expect(replies.map((r) => [r.headers[':status'], r.headers['x-checked']])).toEqual([
        [200, 'checked'],
        [200, 'checked'],
      ]);
      expect(replies[0].body).toBe('GET /echo - ');
      expect(replies[1].body.length).toBe(8 * 1024 * 1024);
    } finally {
      session.close();
      configureEgress({ allow: [] });
      await checks.close();
    }
  });

  it("decodes a chunked answer and passes its trailers on as HTTP/2's", async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    const session = connect(host);
    try {
      const reply = await request(session, host, '/chunked');
      expect(reply.body).toBe('part one, part two');
      expect(reply.headers['transfer-encoding']).toBeUndefined();
      expect(reply.trailers['x-checksum']).toBe('abc123');
      const big = await request(session, host, '/big');
      expect(big.body.length).toBe(8 * 1024 * 1024);
      expect(/^a+$/.test(big.body)).toBe(true);
    } finally {
      session.close();
    }
  });

  it("writes the edge's page for a name no endpoint serves", async () => {
    const session = connect('nobody.burrow.test');
    try {
      const reply = await request(session, 'nobody.burrow.test', '/');
      expect(reply.headers[':status']).toBe(404);
      expect(reply.headers['burrow-error-code']).toBeDefined();
    } finally {
      session.close();
    }
  });

  it('refuses a target it reads no single way with the page, and CONNECT (Node’s 405); the service sees nothing', async () => {
    const { hostname } = endpoints.publicEndpoint('http', service.port, POLICY);
    const host = hostname!;
    const refused = (): number =>
      metricValue(t.metrics, 'burrow_http_requests_total', { endpoint: 'none', code: '400' });
    const before = refused();
    const session = connect(host);
    try {
      for (const path of ['/public%2f..%2fadmin', '/a#frag', '/public\\..\\admin']) {
        const reply = await request(session, host, path);
        expect([path, reply.headers[':status']]).toEqual([path, 400]);
        expect(reply.headers['burrow-error-code']).toBe('ERR_BURROW_BAD_REQUEST_TARGET');
      }
      const connectReply = await new Promise<H2Reply>((resolve, reject) => {
        const stream = session.request({ ':method': 'CONNECT', ':authority': `${host}:443` });
        let headers: IncomingHttpHeaders = {};
        let body = '';
        stream.on('response', (h) => (headers = h));
        stream.setEncoding('utf8');
        stream.on('data', (d: string) => (body += d));
        stream.on('end', () => resolve({ headers, body, trailers: {} }));
        stream.on('error', reject);
        stream.end();
      });
      expect(connectReply.headers[':status']).toBe(405);
      // The connection serves on.
      const after = await request(session, host, '/echo');
      expect(after.headers[':status']).toBe(200);
    } finally {
      session.close();
    }
    expect(refused()).toBe(before + 3);
  });

  it('answers 502 (a gRPC status to gRPC) when the service hangs up without answering', async () => {
    // Inspector off (t has none): the page must not hang on the inspector's hook being absent.
    const hangUp = await startTcpUpstream((socket) => socket.once('data', () => socket.end()));
    const host = endpoints.publicEndpoint('http', hangUp.port).hostname!;
    const session = connect(host);
    try {
      const page = await request(session, host, '/');
      expect(page.headers[':status']).toBe(502);
      expect(page.headers['burrow-error-code']).toMatch(/^ERR_/);
      const grpc = await new Promise<IncomingHttpHeaders>((resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': '/pkg.Svc/Call',
          ':authority': host,
          'content-type': 'application/grpc',
        });
        stream.on('response', resolve);
        stream.on('error', reject);
        stream.end();
      });
      expect([grpc[':status'], grpc['grpc-status']]).toEqual([200, '14']);
    } finally {
      session.close();
      await hangUp.close();
    }
  });

  it('releases the tunnel stream at once when the client resets its stream', async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    const released = (): number =>
      metricValue(t.metrics, 'burrow_http_streams_released_total', { path: 'lean' });
    const before = released();
    const open = service.open;
    const session = connect(host);
    try {
      const stream = session.request({ ':path': '/slow', ':authority': host });
      stream.on('error', () => undefined);
      await until(() => service.open > open);
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await until(() => released() === before + 1);
      await until(() => service.open === open);
    } finally {
      session.close();
    }
  });
});
