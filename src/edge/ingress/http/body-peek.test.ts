import { createHmac } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyEventLog } from '../../../policy/index.js';
import { withPolicy } from '../../../../test/support/policy.js';
import { policyEndpoints } from '../../../../test/support/policy-endpoints.js';
import {
  fakeTunnel,
  listenLocal,
  rawExchange,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { BodyPeek } from './body-peek.js';
import { POLICY_BODY_LIMIT } from './http-policy-body.js';
import { parseRequestHead, type RequestHead } from './request-head.js';

const SECRET = 's3cret';
const WEBHOOK = `
on_http_request:
  - actions:
      - type: verify-webhook
        config: {provider: hmac, secret: ${SECRET}, header: X-Signature, algorithm: sha256, encoding: hex}
`;
/** A rule on `req.trailers`: on_http_request reads the whole body before its rules. */
const TRAILERS = `
on_http_request:
  - expressions: ["'x-checksum' in req.trailers"]
    actions: [{type: add-headers, config: {headers: {x-trailer-seen: "\${req.trailers['x-checksum'][0]}"}}}]
`;

const sign = (body: string | Buffer): string =>
  createHmac('sha256', SECRET).update(body).digest('hex');

function head(text: string): RequestHead {
  const parsed = parseRequestHead(text, { maxHeaderBytes: 16384 });
  if ('status' in parsed) throw new Error(parsed.reason);
  return parsed;
}

describe('BodyPeek (a body read for its policy, its bytes kept)', () => {
  it('decodes a chunked body and its trailers, keeping the bytes as sent', async () => {
    const h = head('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n');
    const peek = new BodyPeek(h, () => undefined);
    peek.parse(Buffer.from('5\r\nhel'));
    peek.feed(Buffer.from('lo\r\n6;x=1\r\n world\r\n0\r\nX-Sum: 1\r\nx-sum: 2\r\n\r\nGET'));
    expect((await peek.body).toString()).toBe('hello world');
    expect(peek.trailers()).toEqual({ 'x-sum': '1, 2' });
    // Only fed chunks are kept: parsed ones stay where they were read.
    expect(Buffer.concat(peek.raw).toString()).toMatch(/^lo\r\n6;x=1/);
    // Bytes of the next requests held after the body count towards pausing the client.
    peek.feed(Buffer.alloc(10));
    expect(peek.overfull(20)).toBe(false);
    expect(peek.overfull(5)).toBe(true);
  });

  it('reads a body of 100,000 one-byte chunks whole', async () => {
    const h = head('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n');
    const peek = new BodyPeek(h, () => undefined);
    peek.feed(Buffer.from('1\r\nb\r\n'.repeat(100_000) + '0\r\n\r\n'));
    const body = await peek.body;
    expect([body.length, body[0], body[99_999]]).toEqual([100_000, 0x62, 0x62]);
  });

  it('refuses a body over the limit or malformed, and one that takes too long', async () => {
    const big = head(
      `POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${POLICY_BODY_LIMIT + 1}\r\n\r\n`,
    );
    const over = new BodyPeek(big, () => undefined);
    over.feed(Buffer.alloc(POLICY_BODY_LIMIT + 1));
    await expect(over.body).rejects.toThrow(/over 10485760 bytes/);
    expect(over.overfull(Infinity)).toBe(true);

    const chunked = head('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n');
    const bad = new BodyPeek(chunked, () => undefined);
    bad.feed(Buffer.from('zz\r\n'));
    await expect(bad.body).rejects.toThrow(/malformed: a chunk without a size/);

    let timedOut = false;
    const slow = new BodyPeek(
      head('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n'),
      () => (timedOut = true),
      50,
    );
    slow.feed(Buffer.from('abc'));
    await expect(slow.body).rejects.toThrow(/took longer than 0.05 s/);
    expect(timedOut).toBe(true);
  });
});

/**
 * Policies that read the request body before deciding, on both wires: the body is read for the
 * policy and then relayed as sent. The service sends no `Date` header and the relay passes its
 * head on as bytes.
 */
describe('policies that read the body, on the lean relay', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  const events = new PolicyEventLog();
  let n = 0;
  /** What the service received: method, body, trailers, the header the policy added. */
  const seen: Array<{ body: string; trailers: Record<string, string>; added?: string }> = [];

  beforeAll(async () => {
    t = await startTestIngress();
    upstream = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const added = req.headers['x-trailer-seen'];
          seen.push({
            body: Buffer.concat(chunks).toString(),
            trailers: req.trailers as Record<string, string>,
            ...(typeof added === 'string' ? { added } : {}),
          });
          res.end(`got ${Buffer.concat(chunks).length}`);
        });
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  function online(policy: string): { tunnel: FakeTunnel; host: string } {
    const host = `peek${++n}.burrow.test`;
    const tunnel = withPolicy(
      fakeTunnel({ proto: 'http', hostname: host, upstreamPort: upstream.port }),
      policy,
      events,
    );
    t.registry.addTunnel(tunnel);
    return { tunnel, host };
  }

  const post = (host: string, body: string, headers: Record<string, string> = {}): string =>
    `POST /hook HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    `\r\n${body}`;

  it('verify-webhook: a signed body is relayed as sent, a forged one refused, on one connection', async () => {
    const { host, tunnel } = online(WEBHOOK);
    const before = seen.length;
    const good = '{"event":"push"}';
    const forged = '{"event":"delete"}';
    // Pipelined in one write, so the bodies and the next heads arrive with the first head.
    const reply = await rawExchange(
      t.httpPort,
      post(host, good, { 'X-Signature': sign(good) }) +
        post(host, good, { 'X-Signature': sign(good) }) +
        post(host, forged, { 'X-Signature': sign(good), Connection: 'close' }),
    );
    const statuses = [...reply.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '200', '403']);
    // Relayed: the service's own answers, without a Date header.
    expect(reply.split('\r\n\r\n')[0]).not.toMatch(/^date:/im);
    expect(reply).toContain('got 16');
    expect(seen.slice(before).map((s) => s.body)).toEqual([good, good]);
    expect(tunnel.connects.length).toBe(1);
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toContain('webhook-refused');
  });

  it('reads a body that comes after the head, in pieces, and answers Expect: 100-continue', async () => {
    const { host } = online(WEBHOOK);
    const before = seen.length;
    const body = 'x'.repeat(200_000);
    const socket = connect(t.httpPort, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const text = (): string => Buffer.concat(chunks).toString('latin1');
    // Listened for from the start: the answer may come, and the edge close, while the body goes.
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(
      `POST /hook HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${body.length}\r\n` +
        `X-Signature: ${sign(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    );
    await until(() => text().startsWith('HTTP/1.1 100 Continue\r\n\r\n'));
    for (let i = 0; i < body.length; i += 50_000) {
      socket.write(body.slice(i, i + 50_000));
      await new Promise((r) => setTimeout(r, 5));
    }
    await closed;
    expect(text()).toMatch(/HTTP\/1\.1 200 OK[\s\S]*got 200000$/);
    expect(seen.slice(before).map((s) => s.body.length)).toEqual([200_000]);
  });

  it('req.trailers: a chunked body is read first, then relayed with its coding and trailers', async () => {
    const { host } = online(TRAILERS);
    const before = seen.length;
    const reply = await rawExchange(
      t.httpPort,
      `POST / HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
        '5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n',
    );
    expect(reply).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(reply.split('\r\n\r\n')[0]).not.toMatch(/^date:/im);
    expect(seen.slice(before)).toEqual([
      { body: 'hello', trailers: { 'x-checksum': 'abc' }, added: 'abc' },
    ]);
  });

  it('HTTP/2: verify-webhook and req.trailers read the body on the relay, which then sends it', async () => {
    const webhook = online(WEBHOOK);
    const trailers = online(TRAILERS);
    const before = seen.length;
    // One connection per name (a TLS connection serves the name it was made for).
    const sessions = [webhook.host, trailers.host].map((servername) =>
      http2.connect(`https://127.0.0.1:${t.httpsPort}`, { ca: t.ca.certPem, servername }),
    );
    const send = (
      host: string,
      body: string,
      headers: Record<string, string>,
      trailer?: Record<string, string>,
    ): Promise<string> =>
      new Promise((resolve, reject) => {
        const session = sessions[host === webhook.host ? 0 : 1]!;
        const stream = session.request(
          { ':method': 'POST', ':path': '/hook', ':authority': host, ...headers },
          { waitForTrailers: trailer !== undefined },
        );
        if (trailer) stream.once('wantTrailers', () => stream.sendTrailers(trailer));
        let text = '';
        let status = 0;
        stream.on('response', (h) => (status = Number(h[':status'])));
        stream.setEncoding('utf8');
        stream.on('data', (d: string) => (text += d));
        stream.on('end', () => resolve(`${status} ${text}`));
        stream.on('error', reject);
        // In two pieces: the policy waits for the whole body.
        stream.write(body.slice(0, 4));
        stream.end(body.slice(4));
      });
    try {
      const good = '{"event":"push"}';
      const length = String(Buffer.byteLength(good));
      const signed = await send(webhook.host, good, {
        'x-signature': sign(good),
        'content-length': length,
      });
      expect(signed).toBe('200 got 16');
      const unsized = await send(webhook.host, good, { 'x-signature': sign(good) });
      expect(unsized).toBe('200 got 16');
      const forged = await send(webhook.host, '{"event":"delete"}', { 'x-signature': sign(good) });
      expect(forged).toMatch(/^403 /);
      const withTrailer = await send(trailers.host, 'hello', {}, { 'x-checksum': 'abc' });
      expect(withTrailer).toBe('200 got 5');
      expect(seen.slice(before).map((s) => [s.body, s.added])).toEqual([
        [good, undefined],
        [good, undefined],
        ['hello', 'abc'],
      ]);
    } finally {
      for (const session of sessions) session.close();
    }
  });

  it("an internal endpoint's verify-webhook reads the body on the relay, behind a forward-internal hop", async () => {
    const endpoints = policyEndpoints(t.registry);
    endpoints.internalEndpoint('https', 'hook-lean.internal', upstream.port, WEBHOOK);
    const front = endpoints.publicEndpoint(
      'http',
      0,
      'on_http_request: [{actions: [{type: forward-internal, config: {url: "https://hook-lean.internal"}}]}]',
      'cloud',
    );
    const host = front.hostname!;
    const before = { seen: seen.length };
    try {
      const good = '{"event":"push"}';
      const reply = await rawExchange(
        t.httpPort,
        post(host, good, { 'X-Signature': sign(good) }) +
          post(host, '{"event":"delete"}', { 'X-Signature': sign(good), Connection: 'close' }),
      );
      const statuses = [...reply.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
      expect(statuses).toEqual(['200', '403']);
      expect(reply.split('\r\n\r\n')[0]).not.toMatch(/^date:/im);
      expect(seen.slice(before.seen).map((s) => s.body)).toEqual([good]);
    } finally {
      endpoints.removeAll();
    }
  });

  it('a body over the limit is refused and the connection closed; the service gets nothing', async () => {
    const { host, tunnel } = online(WEBHOOK);
    const before = seen.length;
    const size = POLICY_BODY_LIMIT + 1;
    const socket = connect(t.httpPort, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.write(
      `POST /hook HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\nX-Signature: 00\r\n\r\n`,
    );
    socket.write(Buffer.alloc(size, 0x61));
    await new Promise((r) => socket.once('close', r));
    expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 403 /);
    expect(seen.length).toBe(before);
    expect(tunnel.connects).toEqual([]);
    const refused = events.eventsFor(tunnel.id).map((e) => e.message);
    expect(refused.join('\n')).toMatch(/over 10485760 bytes/);
  });
});

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
