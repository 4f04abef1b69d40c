import { once } from 'node:events';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { SecureVersion } from 'node:tls';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyEventLog } from '../../../policy/index.js';
import { startTestUpstream, type TestUpstream } from '../../../../test/support/http-upstream.js';
import {
  fakeTunnel,
  httpRequest,
  startHttpUpstream,
  startTestIngress,
  type FakeTunnel,
  type HttpReply,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { withPolicy } from '../../../../test/support/policy.js';
import { applyToRawHeaders } from './header-changes.js';

let t: TestIngress;
let upstream: TestUpstream;
let notFound: LocalServer;
const events = new PolicyEventLog();
let n = 0;

beforeAll(async () => {
  t = await startTestIngress();
  upstream = await startTestUpstream();
  notFound = await startHttpUpstream((req, res) => {
    res.writeHead(404, { 'content-type': 'text/plain', 'x-upstream': 'yes' });
    res.end('upstream says no');
  });
});

afterAll(async () => {
  await t.close();
  await upstream.close();
  await notFound.close();
});

/** An online tunnel with `policy` in front of the echoing upstream (or `upstreamPort`). */
function policied(
  policy: string,
  proto: 'http' | 'https' = 'http',
  upstreamPort = upstream.port,
): { tunnel: FakeTunnel; host: string } {
  const host = `p${++n}.burrow.test`;
  const tunnel = withPolicy(fakeTunnel({ proto, hostname: host, upstreamPort }), policy, events);
  t.registry.addTunnel(tunnel);
  return { tunnel, host };
}

const echoed = (reply: HttpReply) =>
  JSON.parse(reply.body) as { url: string; headers: Record<string, string> };

/** HTTPS GET to the ingress with a TLS version cap. */
function httpsGet(host: string, maxVersion: SecureVersion): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port: t.httpsPort,
        path: '/echo',
        servername: host,
        headers: { Host: host },
        ca: t.ca.certPem,
        agent: false,
        maxVersion,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('traffic policy on the HTTP ingress', () => {
  it('denies by header with 403 without contacting the agent; others pass', async () => {
    const { tunnel, host } = policied(`
on_http_request:
  - name: block
    expressions: ["'x-block' in req.headers"]
    actions: [{type: deny}]`);
    const denied = await httpRequest(t.httpPort, {
      host,
      path: '/echo',
      headers: { 'X-Block': '1' },
    });
    expect(denied.status).toBe(403);
    expect(tunnel.connects).toHaveLength(0);
    const passed = await httpRequest(t.httpPort, { host, path: '/echo' });
    expect(passed.status).toBe(200);
    expect(tunnel.connects).toHaveLength(1);
    expect(events.eventsFor(tunnel.id)[0]).toMatchObject({
      outcome: 'denied',
      rule: { name: 'block' },
      client_ip: '127.0.0.1',
    });
  });

  it('a bare deny and a restrict-ips refusal answer with the error page of their code', async () => {
    const { tunnel, host } = policied(`
on_http_request:
  - name: block
    expressions: ["'x-block' in req.headers"]
    actions: [{type: deny, config: {status_code: 404}}]
  - name: office only
    actions: [{type: restrict-ips, config: {allow: [192.0.2.0/24]}}]`);
    const denied = await httpRequest(t.httpPort, { host, path: '/', headers: { 'X-Block': '1' } });
    expect(denied.status).toBe(404);
    expect(denied.headers['burrow-error-code']).toBe('ERR_BURROW_POLICY_DENIED');
    expect(denied.body).toBe(
      "404 Not Found\n\nThe endpoint's traffic policy denied this request (a deny rule).\n\nERR_BURROW_POLICY_DENIED\n",
    );
    const restricted = await httpRequest(t.httpPort, {
      host,
      path: '/',
      headers: { Accept: 'text/html' },
    });
    expect(restricted.status).toBe(403);
    expect(restricted.headers['burrow-error-code']).toBe('ERR_BURROW_IP_RESTRICTED');
    expect(restricted.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(restricted.body).toContain('<h1>Forbidden</h1>');
    expect(restricted.body).toContain('Your address may not reach this endpoint');
    expect(tunnel.connects).toHaveLength(0);
  });

  it('adds and removes headers on the request and the response; X-Forwarded-* stay the ingress’s', async () => {
    const { host } = policied(`
on_http_request:
  - actions:
      - type: add-headers
        config: {headers: {x-client: "\${conn.client_ip}", x-path: "\${req.url.path}", x-forwarded-for: evil}}
      - type: remove-headers
        config: {headers: [x-secret-token]}
on_http_response:
  - actions:
      - type: add-headers
        config: {headers: {x-status: "\${string(res.status_code)}", x-endpoint: "\${endpoint.host}"}}
      - type: remove-headers
        config: {headers: [x-upstream]}`);
    const reply = await httpRequest(t.httpPort, {
      host,
      path: '/echo?q=1',
      headers: { 'X-Secret-Token': 'hidden' },
    });
    expect(reply.status).toBe(200);
    const seen = echoed(reply).headers;
    expect(seen['x-client']).toBe('127.0.0.1');
    expect(seen['x-path']).toBe('/echo');
    expect(seen['x-secret-token']).toBeUndefined();
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('http');
    expect(reply.headers['x-status']).toBe('200');
    expect(reply.headers['x-endpoint']).toBe(host);
    expect(reply.headers['x-upstream']).toBeUndefined();
  });

  it('rewrites the URL, answers directly, and closes the connection', async () => {
    const { host } = policied(`
on_http_request:
  - expressions: ["req.url.path == '/teapot'"]
    actions: [{type: custom-response, config: {status_code: 418, body: "short and stout", headers: {x-why: tea}}}]
  - expressions: ["req.url.path == '/bye'"]
    actions: [{type: close-connection}]
  - actions: [{type: url-rewrite, config: {from: "/old/([a-z]+)$", to: "/echo?was=$1"}}]`);
    const rewritten = await httpRequest(t.httpPort, { host, path: '/old/thing' });
    expect(echoed(rewritten).url).toBe('/echo?was=thing');
    const teapot = await httpRequest(t.httpPort, { host, path: '/teapot' });
    expect(teapot).toMatchObject({ status: 418, body: 'short and stout' });
    expect(teapot.headers['x-why']).toBe('tea');
    await expect(httpRequest(t.httpPort, { host, path: '/bye' })).rejects.toThrow(
      /socket hang up|ECONNRESET/,
    );
  });

  it('rate-limits with 429 and Retry-After', async () => {
    const { host } = policied(`
on_http_request:
  - actions: [{type: rate-limit, config: {capacity: 2, rate: 60s, bucket_key: [conn.client_ip]}}]`);
    const statuses: number[] = [];
    let last: HttpReply | undefined;
    for (let i = 0; i < 3; i++) {
      last = await httpRequest(t.httpPort, { host, path: '/echo' });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('replaces an upstream response and compresses another with the chosen encoding', async () => {
    const replaced = policied(
      `
on_http_response:
  - expressions: ["res.status_code == 404"]
    actions: [{type: custom-response, config: {status_code: 404, body: "nothing here, politely"}}]`,
      'http',
      notFound.port,
    );
    const reply = await httpRequest(t.httpPort, { host: replaced.host, path: '/x' });
    expect(reply).toMatchObject({ status: 404, body: 'nothing here, politely' });
    expect(reply.headers['x-upstream']).toBeUndefined();

    const { host } = policied(`
on_http_response:
  - actions: [{type: compress-response, config: {algorithms: [gzip]}}]`);
    const raw = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>(
      (resolve, reject) => {
        const socket = connect(t.httpPort, '127.0.0.1');
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('end', () => {
          const all = Buffer.concat(chunks);
          const split = all.indexOf('\r\n\r\n');
          const head = all.subarray(0, split).toString();
          const headers: Record<string, unknown> = {};
          for (const line of head.split('\r\n').slice(1)) {
            const colon = line.indexOf(':');
            headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
          }
          resolve({ headers, body: all.subarray(split + 4) });
        });
        socket.on('error', reject);
        socket.write(
          `GET /echo HTTP/1.1\r\nHost: ${host}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n`,
        );
      },
    );
    expect(raw.headers['content-encoding']).toBe('gzip');
    expect(raw.headers['content-length']).toBeUndefined();
    // Chunked framing: strip the chunk sizes before gunzipping.
    const body = dechunk(raw.body);
    expect(JSON.parse(gunzipSync(body).toString()).url).toBe('/echo');
  });

  it('runs on_tcp_connect once per connection: restrict-ips closes, set-vars carries into requests', async () => {
    const blocked = policied(`
on_tcp_connect:
  - actions: [{type: restrict-ips, config: {deny: [127.0.0.0/8]}}]`);
    await expect(httpRequest(t.httpPort, { host: blocked.host })).rejects.toThrow(
      /socket hang up|ECONNRESET/,
    );
    expect(blocked.tunnel.connects).toHaveLength(0);
    const allowed = policied(`
on_tcp_connect:
  - actions:
      - type: restrict-ips
        config: {allow: [127.0.0.1/32]}
      - type: set-vars
        config: {vars: [{port_class: "\${conn.client_port > 1023 ? 'high' : 'low'}"}]}
on_http_request:
  - actions: [{type: add-headers, config: {headers: {x-port-class: "\${vars.port_class}"}}}]`);
    const reply = await httpRequest(t.httpPort, { host: allowed.host, path: '/echo' });
    expect(echoed(reply).headers['x-port-class']).toBe('high');
  });

  it('sees TLS facts on HTTPS: the sample denies TLS 1.3 clients while TLS 1.2 passes', async () => {
    const { host } = policied(
      `
on_tcp_connect:
  - name: AllowTLS1.3
    expressions: ["conn.TLS.Version.contains('1.3')"]
    actions: [{type: deny}]
on_http_request:
  - actions: [{type: add-headers, config: {headers: {x-tls: "\${conn.tls.version} \${conn.tls.sni}"}}}]`,
      'https',
    );
    await expect(httpsGet(host, 'TLSv1.3')).rejects.toThrow(/socket hang up|ECONNRESET/);
    const reply = await httpsGet(host, 'TLSv1.2');
    expect(reply.status).toBe(200);
    expect(echoed(reply).headers['x-tls']).toBe(`1.2 ${host}`);
  });

  it('applies on_http_request to upgrades too', async () => {
    const { tunnel, host } = policied(`
on_http_request:
  - expressions: ["req.headers['upgrade'][0] == 'websocket'"]
    actions: [{type: deny, config: {status_code: 401}}]`);
    const socket = connect(t.httpPort, '127.0.0.1');
    socket.write(
      `GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    await once(socket, 'end');
    expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
    expect(tunnel.connects).toHaveLength(0);
  });
});

describe('applyToRawHeaders', () => {
  it('removes, then adds, leaving the names the ingress owns alone', () => {
    const owned = new Set(['host']);
    const raw = ['Host', 'a', 'X-One', '1', 'x-one', '2', 'X-Two', '2'];
    expect(
      applyToRawHeaders(
        raw,
        {
          remove: ['x-one', 'host'],
          add: [
            ['x-three', '3'],
            ['host', 'b'],
          ],
        },
        owned,
      ),
    ).toEqual(['Host', 'a', 'X-Two', '2', 'x-three', '3']);
    expect(applyToRawHeaders(raw, { remove: [], add: [] }, owned)).toBe(raw);
  });
});

/** The payload of a chunked HTTP/1.1 body. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    const size = parseInt(body.subarray(at, eol).toString(), 16);
    if (!size) return Buffer.concat(parts);
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}
