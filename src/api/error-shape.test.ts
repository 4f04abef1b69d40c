import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestApi,
  TEST_BASE_URL,
  type TestApi,
  type TestReply,
} from '../../test/support/api.js';
import { buildApi } from './app.js';

/**
 * Every error the API sends has the documented shape and carries its operation id in the
 * Operation-Id header, including the ones Fastify and Node's HTTP parser raise before any route
 * runs; and no message echoes more than a short, visible quote of what the client sent.
 */

const OPERATION_ID = /^op_[0-9A-Za-z]{27}$/;

/** The documented error shape, with the header and the body agreeing on the operation id. */
function expectErrorShape(
  res: { status: number; headers: Record<string, unknown>; body: unknown },
  status: number,
): void {
  expect(res.status).toBe(status);
  const operationId = res.headers['operation-id'];
  expect(operationId).toMatch(OPERATION_ID);
  expect(res.headers['ngrok-operation-id']).toBe(operationId);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = res.body as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(
    ['details', 'msg', 'status_code', ...('error_code' in body ? ['error_code'] : [])].sort(),
  );
  if ('error_code' in body) expect(body.error_code).toMatch(/^ERR_NGROK_\d+$/);
  expect(body.status_code).toBe(status);
  expect(typeof body.msg).toBe('string');
  expect((body.details as Record<string, unknown>).operation_id).toBe(operationId);
}

/** A message that quotes `input` (at least 100 characters long) only in short form. */
function expectShortQuote(msg: string, input: string): void {
  expect(msg).toContain(`${input.slice(0, 60)}…`);
  expect(msg).not.toContain(input.slice(0, 61));
  expect(msg.length).toBeLessThan(300);
}

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Send raw bytes to `port` and read the whole reply until the server closes the connection. */
async function rawRequest(port: number, bytes: string): Promise<RawReply> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.write(bytes);
  });
  return parseReply(text);
}

function parseReply(text: string): RawReply {
  const split = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = text.slice(split + 4);
  expect(Buffer.byteLength(body)).toBe(Number(headers['content-length']));
  return {
    status: Number(statusLine!.split(' ')[1]),
    headers,
    body: JSON.parse(body) as unknown,
  };
}

describe('error shape', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi('sqlite');
  });
  afterAll(async () => api.close());

  describe('errors Fastify raises before our hooks run', () => {
    it('414 for an over-long path parameter, quoting the path in short form', async () => {
      const id = 'bot_' + 'x'.repeat(5000);
      const res = await api.call('GET', `/bot_users/${id}`);
      expectErrorShape(res, 414);
      expect(res.body.error_code).toBe('ERR_NGROK_215');
      expectShortQuote(res.body.msg, `/bot_users/${id}`);
    });

    it('400 for malformed percent-encoding in the path', async () => {
      const res = await api.call('GET', '/bot_users/%E0%A4%A');
      expectErrorShape(res, 400);
      expect(res.body.msg).toContain('malformed percent-encoding');
    });

    it('400 ERR_NGROK_216 for a body that is not JSON, 213 for broken JSON, 413 for too much', async () => {
      const form = await api.call('POST', '/bot_users', 'name=x', {
        'content-type': 'application/x-www-form-urlencoded',
      });
      expectErrorShape(form, 400);
      expect(form.body.error_code).toBe('ERR_NGROK_216');
      const broken = await api.call('POST', '/bot_users', '{"name": "' + 'x'.repeat(10_000));
      expectErrorShape(broken, 400);
      expect(broken.body.error_code).toBe('ERR_NGROK_213');
      expect(broken.body.msg.length).toBeLessThan(300);
      const large = await api.call('POST', '/bot_users', JSON.stringify({ name: 'x'.repeat(2e6) }));
      expectErrorShape(large, 413);
    });

    it('400 with its own message when the body is shorter than Content-Length', async () => {
      const res = await api.app.inject({
        method: 'POST',
        url: '/bot_users',
        headers: {
          authorization: `Bearer ${api.key}`,
          'service-version': '2',
          'content-type': 'application/json',
          'content-length': '100',
        },
        payload: '{"name":"short"}',
      });
      const reply: TestReply = {
        status: res.statusCode,
        headers: res.headers,
        body: JSON.parse(res.body) as unknown,
      };
      expectErrorShape(reply, 400);
      expect(reply.body.msg).toContain('Content-Length');
    });

    it('404 for an unknown route, with the path shortened', async () => {
      const path = '/' + 'z'.repeat(8000);
      const res = await api.call('GET', path);
      expectErrorShape(res, 404);
      expect(res.body.msg).toBe('Not Found');
      expect(res.body.details.path).toBe(`${path.slice(0, 60)}…`);
    });
  });

  describe('messages quote input only in short, visible form', () => {
    it('an unknown field with a huge name', async () => {
      const name = 'f'.repeat(100_000);
      const res = await api.call('POST', '/bot_users', { name: 'ok', [name]: 1 });
      expectErrorShape(res, 400);
      expect(res.body.error_code).toBe('ERR_NGROK_214');
      expectShortQuote(res.body.msg, name);
      expect(res.body.details.field).toBe(`${name.slice(0, 60)}…`);
    });

    it('an unknown query parameter and a bad limit', async () => {
      const param = 'q'.repeat(5000);
      const unknown = await api.call('GET', `/bot_users?${param}=1`);
      expectErrorShape(unknown, 400);
      expectShortQuote(unknown.body.msg, param);
      const limit = '9'.repeat(5000);
      const bad = await api.call('GET', `/bot_users?limit=${limit}`);
      expectErrorShape(bad, 400);
      expectShortQuote(bad.body.msg, limit);
    });

    it('a huge version header', async () => {
      const version = 'v'.repeat(10_000);
      const res = await api.call('GET', '/bot_users', undefined, { 'service-version': version });
      expectErrorShape(res, 400);
      expect(res.body.error_code).toBe('ERR_NGROK_217');
      expectShortQuote(res.body.msg, version);
    });

    it('values the store refuses: hostports, CIDRs, domains, ACL rules, ids', async () => {
      const long = 'h'.repeat(50_000);
      const cases: [string, string, unknown][] = [
        ['POST', '/edges/tcp', { hostports: [`${long}:1`] }],
        ['POST', '/ip_policy_rules', { cidr: long, ip_policy_id: 'ipp_x', action: 'allow' }],
        ['POST', '/reserved_domains', { domain: `${long.slice(0, 200)}.example.com` }],
        ['POST', '/credentials', { acl: [`bind:${long}`] }],
        ['POST', '/credentials', { owner_id: `bot_${long}` }],
        ['POST', '/backends/static', { address: long }],
        ['POST', '/backends/failover', { backends: [`bkdtg_${long}`] }],
      ];
      for (const [method, path, body] of cases) {
        const res = await api.call(method, path, body);
        expectErrorShape(res, 400);
        expect(res.body.msg).toContain('hhh…');
        expect(res.body.msg).not.toContain('h'.repeat(61));
        expect(res.body.msg.length).toBeLessThan(400);
      }
    });

    it('quotes a traffic policy rule name short, with invisible characters spelled out', async () => {
      const name = `\u202E${'r'.repeat(50_000)}`;
      const policy = { on_tcp_connect: [{ name, actions: [{ type: 'no-such-action' }] }] };
      const res = await api.call('POST', '/edges/tcp', {
        traffic_policy: { value: JSON.stringify(policy) },
      });
      expectErrorShape(res, 400);
      // The message lists the known actions too; the 50,000-character name is what must not be there.
      expect(res.body.msg).not.toContain('r'.repeat(61));
      expect(res.body.msg).toContain('r…');
      expect(res.body.msg).not.toContain('\u202E');
      expect(res.body.msg).toContain('\\u{202E}rrr');
    });

    it('spells out invisible characters instead of echoing them', async () => {
      const res = await api.call('POST', '/edges/tcp', { hostports: ['evil\u202Ehost:1'] });
      expectErrorShape(res, 400);
      expect(res.body.msg).toContain('evil\\u{202E}host:1');
      expect(res.body.msg).not.toContain('\u202E');
    });
  });

  describe('errors of the HTTP parser, over a real connection', () => {
    let app: FastifyInstance;
    let port: number;
    beforeAll(async () => {
      app = await buildApi({
        repos: api.repos,
        publicApiUrl: TEST_BASE_URL,
        rateLimit: { max: 0, windowSeconds: 60 },
      });
      await app.listen({ host: '127.0.0.1', port: 0 });
      port = (app.server.address() as { port: number }).port;
    });
    afterAll(async () => app.close());

    it('431 for headers over 16 KiB, in the Burrow shape with Operation-Id', async () => {
      const res = await rawRequest(
        port,
        `GET /bot_users HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      );
      expectErrorShape(res, 431);
      expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_212' });
      expect(res.headers.connection).toBe('close');
    });

    it('431 for a request line over 16 KiB', async () => {
      const res = await rawRequest(
        port,
        `GET /bot_users/${'b'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      );
      expectErrorShape(res, 431);
    });

    it('400 for bytes that are not HTTP', async () => {
      const res = await rawRequest(port, 'HELLO THERE\r\n\r\n');
      expectErrorShape(res, 400);
      expect((res.body as { msg: string }).msg).toContain('not valid HTTP/1.1');
    });

    it('a well-formed request on the same server still works', async () => {
      const res = await rawRequest(
        port,
        `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      expect(res.status).toBe(200);
      expect(res.headers['operation-id']).toMatch(OPERATION_ID);
    });
  });

  it('503 in the Burrow shape for a request that arrives while the server closes', async () => {
    const app = await buildApi({
      repos: api.repos,
      publicApiUrl: TEST_BASE_URL,
      rateLimit: { max: 0, windowSeconds: 60 },
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as { port: number }).port;
    const headers = `Host: x\r\nAuthorization: Bearer ${api.key}\r\nService-Version: 2\r\n`;
    const body = '{"name":"made while closing"}';
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((resolve) => socket.on('close', resolve));
    // The first request is under way (its body not all sent) when the server starts closing; the
    // second, pipelined behind it, reaches the router only after closing has begun.
    socket.write(
      `POST /bot_users HTTP/1.1\r\n${headers}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((r) => setTimeout(r, 100));
    const closing = app.close();
    await new Promise((r) => setTimeout(r, 100));
    socket.write(`${body.slice(5)}GET /bot_users HTTP/1.1\r\n${headers}\r\n`);
    await closed;
    await closing;
    const text = Buffer.concat(chunks).toString('utf8');
    const second = text.indexOf('HTTP/1.1', 1);
    expect(parseReply(text.slice(0, second)).status).toBe(201);
    const res = parseReply(text.slice(second));
    expectErrorShape(res, 503);
    expect((res.body as { msg: string }).msg).toContain('shutting down');
  });
});
