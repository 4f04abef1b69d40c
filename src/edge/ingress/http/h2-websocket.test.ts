/**
 * WebSocket over HTTP/2 (RFC 8441), over real sockets: Node's http2 client sends an extended
 * CONNECT to the ingress's HTTPS listener, which judges it as the HTTP/1.1 upgrade it stands for
 * and sends that to an HTTP/1.1 service behind a fake tunnel; the service's 101 opens the client's
 * stream (200) as a raw relay, while the connection's other streams go on. A service that does not
 * switch, a policy's refusal and an `http2` endpoint each get an answer the client cannot take for
 * an open tunnel.
 */
import { createHash } from 'node:crypto';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { INGRESS_ERRORS } from '../error-pages.js';

const DENY_ADMIN = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{type: deny}]
`;

let t: TestIngress;
let endpoints: PolicyEndpoints;
/** Takes every WebSocket upgrade (101, with the Accept its key asks for), then echoes upper-cased. */
let switching: LocalServer;
/** What `switching` got: method, target and the handshake's headers. */
const upgrades: Array<{ method: string; url: string; headers: IncomingMessage['headers'] }> = [];
/** Answers every request, upgrades too, with a plain 200. */
let plain: LocalServer;

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  switching = await startHttpUpstream(
    (_req, res) => res.end('not an upgrade'),
    (server) =>
      server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
        upgrades.push({ method: req.method!, url: req.url!, headers: req.headers });
        const accept = createHash('sha1')
          .update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
          .digest('base64');
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: chat\r\n\r\n`,
        );
        socket.on('data', (d: Buffer) => socket.write(d.toString().toUpperCase()));
        socket.on('end', () => socket.end());
      }),
  );
  plain = await startHttpUpstream((req, res) => {
    req.resume();
    res.end('plain');
  });
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await switching.close();
  await plain.close();
});

/** A connection to the HTTPS listener, once the edge has said it takes extended CONNECT. */
async function connect(host: string): Promise<ClientHttp2Session> {
  const session = http2.connect(`https://127.0.0.1:${t.httpsPort}`, {
    ca: t.ca.certPem,
    servername: host,
  });
  await new Promise<void>((resolve, reject) => {
    session.once('remoteSettings', () => resolve());
    session.once('error', reject);
  });
  return session;
}

/** Open an extended CONNECT for WebSocket to `path`; resolves with the answer's headers. */
function openWebSocket(session: ClientHttp2Session, host: string, path: string) {
  const stream = session.request({
    ':method': 'CONNECT',
    ':protocol': 'websocket',
    ':scheme': 'https',
    ':path': path,
    ':authority': host,
    'sec-websocket-version': '13',
    'sec-websocket-protocol': 'chat',
  });
  stream.on('error', () => undefined);
  const answered = new Promise<IncomingHttpHeaders>((resolve, reject) => {
    stream.once('response', resolve);
    stream.once('close', () => reject(new Error(`closed before an answer: ${stream.rstCode}`)));
  });
  return { stream, answered };
}

describe('WebSocket over HTTP/2 (RFC 8441)', () => {
  it('opens on the service’s 101 and relays both ways; other streams go on meanwhile', async () => {
    const host = endpoints.publicEndpoint('http', switching.port, DENY_ADMIN).hostname!;
    const session = await connect(host);
    expect(session.remoteSettings.enableConnectProtocol).toBe(true);
    try {
      const before = upgrades.length;
      const { stream, answered } = openWebSocket(session, host, '/chat?room=1');
      const headers = await answered;
      expect(headers[':status']).toBe(200);
      expect(headers['sec-websocket-protocol']).toBe('chat');
      expect(headers['sec-websocket-accept']).toBeUndefined();
      // The service got the HTTP/1.1 handshake the extended CONNECT stands for.
      const got = upgrades[before]!;
      expect([got.method, got.url, got.headers.upgrade]).toEqual([
        'GET',
        '/chat?room=1',
        'websocket',
      ]);
      expect(got.headers.connection).toMatch(/upgrade/i);
      expect(got.headers['sec-websocket-key']).toMatch(/^[A-Za-z0-9+/]{22}==$/);
      expect(got.headers['sec-websocket-version']).toBe('13');
      stream.setEncoding('utf8');
      const echoed = new Promise<string>((resolve) => stream.once('data', resolve));
      stream.write('hello');
      expect(await echoed).toBe('HELLO');
      // A plain request on the same connection while the tunnel is open.
      const other = session.request({ ':path': '/x', ':authority': host });
      other.setEncoding('utf8');
      let body = '';
      other.on('data', (d: string) => (body += d));
      await new Promise((resolve) => other.once('end', resolve));
      expect(body).toBe('not an upgrade');
      stream.end();
      await new Promise((resolve) => stream.once('close', resolve));
    } finally {
      session.close();
    }
  });

  it('judges the upgrade by the policy: a denied path gets the refusal, the service nothing', async () => {
    const host = endpoints.publicEndpoint('http', switching.port, DENY_ADMIN).hostname!;
    const session = await connect(host);
    try {
      const before = upgrades.length;
      const { answered } = openWebSocket(session, host, '/admin/live');
      expect((await answered)[':status']).toBe(403);
      expect(upgrades.length).toBe(before);
    } finally {
      session.close();
    }
  });

  it('answers 502 when the service does not switch: a 2xx would read as the tunnel open', async () => {
    const host = endpoints.publicEndpoint('http', plain.port).hostname!;
    const session = await connect(host);
    try {
      const { answered } = openWebSocket(session, host, '/chat');
      const headers = await answered;
      expect(headers[':status']).toBe(502);
      expect(headers['burrow-error-code']).toBe(INGRESS_ERRORS.tunnelUnreachable.code);
    } finally {
      session.close();
    }
  });

  it('refuses it for an endpoint bound with app protocol http2 (501), whose service takes no upgrade', async () => {
    const tunnel = endpoints.publicEndpoint('http', switching.port);
    Object.assign(tunnel, { appProtocol: 'http2' });
    const session = await connect(tunnel.hostname!);
    try {
      const before = upgrades.length;
      const { answered } = openWebSocket(session, tunnel.hostname!, '/chat');
      expect((await answered)[':status']).toBe(501);
      expect(upgrades.length).toBe(before);
    } finally {
      session.close();
    }
  });
});
