/**
 * HTTP/1.0 clients on the lean relay, over real sockets: the request goes to the service as
 * HTTP/1.0 (so the service frames its answer for such a client), the connection closes after the
 * response unless the client asked to keep it (then the answer says `Connection: keep-alive`), no
 * interim response reaches the client, and a chunked answer, which it could not read, is a 502.
 * How a reply shows the relay carried it: the services send no `Date`; Node's server on the full
 * path would add one.
 */
import type http from 'node:http';
import net, { type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  rawExchange,
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

const DENY_ADMIN = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{type: deny}]
`;

let t: TestIngress;
let endpoints: PolicyEndpoints;
/** Answers `<version> <url>`, with a Content-Length and no Date. */
let service: LocalServer;
const versions: string[] = [];
/** The Upgrade header each request reached the service with. */
const upgrades: Array<string | undefined> = [];

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  service = await startHttpUpstream((req: http.IncomingMessage, res: http.ServerResponse) => {
    versions.push(req.httpVersion);
    upgrades.push(req.headers.upgrade);
    res.sendDate = false;
    const body = `${req.httpVersion} ${req.url}`;
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
  });
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await service.close();
});

const statusLines = (text: string): string[] =>
  text.match(/HTTP\/1\.1 \d{3} [^\r\n]*(?=\r\n)/g) ?? [];

/** A raw service that answers every request with `reply`, as it is. */
async function rawService(reply: string): Promise<LocalServer> {
  return startTcpUpstream((socket: Socket) => {
    socket.once('data', () => socket.end(reply, 'latin1'));
  });
}

describe('HTTP/1.0 on the lean relay', () => {
  it('sends the request as HTTP/1.0 and closes after the answer', async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    const before = versions.length;
    const reply = await rawExchange(t.httpPort, `GET /one HTTP/1.0\r\nHost: ${host}\r\n\r\n`);
    expect(statusLines(reply)).toEqual(['HTTP/1.1 200 OK']);
    expect(reply).toMatch(/\r\nConnection: close\r\n/i);
    expect(reply).not.toMatch(/\r\ndate:/i);
    expect(reply.endsWith('\r\n\r\n1.0 /one')).toBe(true);
    expect(versions.slice(before)).toEqual(['1.0']);
  });

  it('reads an HTTP/1.0 request that asks to upgrade as a plain one, which it is', async () => {
    const host = endpoints.publicEndpoint('http', service.port, DENY_ADMIN).hostname!;
    const before = versions.length;
    const reply = await rawExchange(
      t.httpPort,
      `GET /ws HTTP/1.0\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    );
    expect(statusLines(reply)).toEqual(['HTTP/1.1 200 OK']);
    expect(reply).not.toMatch(/\r\ndate:/i);
    expect(reply.endsWith('\r\n\r\n1.0 /ws')).toBe(true);
    // The service is not asked to switch (Upgrade is hop-by-hop, named by Connection).
    expect([versions.slice(before), upgrades.slice(before)]).toEqual([['1.0'], [undefined]]);
  });

  it('keeps a connection the client asked to keep, and says so', async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    const socket = net.connect(t.httpPort, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`GET /a HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
    await until(() => text.endsWith('1.0 /a'));
    expect(text).toMatch(/\r\nConnection: keep-alive\r\n/);
    expect(socket.destroyed).toBe(false);
    socket.write(`GET /b HTTP/1.0\r\nHost: ${host}\r\n\r\n`);
    await closed;
    expect(statusLines(text)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
    expect(text.endsWith('1.0 /b')).toBe(true);
    expect(text).not.toMatch(/\r\ndate:/i);
  });

  it("writes a policy's answer with Connection: keep-alive to a client that keeps alive", async () => {
    const host = endpoints.publicEndpoint('http', service.port, DENY_ADMIN).hostname!;
    const reply = await rawExchange(
      t.httpPort,
      `GET /admin HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n` +
        `GET /open HTTP/1.0\r\nHost: ${host}\r\n\r\n`,
    );
    expect(statusLines(reply)).toEqual(['HTTP/1.1 403 Forbidden', 'HTTP/1.1 200 OK']);
    expect(reply).toMatch(/\r\nconnection: keep-alive\r\n/);
    expect(reply.endsWith('1.0 /open')).toBe(true);
  });

  it('passes no interim response on, and answers a chunked one 502', async () => {
    const interim = await rawService(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    );
    const chunked = await rawService(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    );
    try {
      const a = endpoints.publicEndpoint('http', interim.port).hostname!;
      const first = await rawExchange(t.httpPort, `GET / HTTP/1.0\r\nHost: ${a}\r\n\r\n`);
      expect(statusLines(first)).toEqual(['HTTP/1.1 200 OK']);
      expect(first.endsWith('\r\n\r\nok')).toBe(true);
      const b = endpoints.publicEndpoint('http', chunked.port).hostname!;
      const second = await rawExchange(t.httpPort, `GET / HTTP/1.0\r\nHost: ${b}\r\n\r\n`);
      expect(statusLines(second)).toEqual(['HTTP/1.1 502 Bad Gateway']);
      expect(second).toContain('a chunked response to an HTTP/1.0 request');
    } finally {
      await interim.close();
      await chunked.close();
    }
  });
});
