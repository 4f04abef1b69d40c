/**
 * Upgrades judged by the agent's answer, over real sockets: an ingress in front of real services
 * through fake tunnels, with a policy on the endpoint. Only a 101 makes a raw relay
 * (protocol-switch.ts), and the bytes the client sent behind the upgrade reach the service only
 * then; any other answer is an HTTP response and each request after it is read and judged by the
 * policy. A client that leaves while the answer is awaited releases the stream.
 */
import net, { type Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  metricValue,
  startHttpUpstream,
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
/** Answers every request (upgrades too: no 'upgrade' listener) with 200 and its target. */
let plain: LocalServer;
/** Takes every upgrade (101) and then echoes the raw bytes back, upper-cased. */
let switching: LocalServer;
/** Never answers. */
let silent: LocalServer;
/** Answers an upgrade with a bare 101 that does not say what follows, then sends bytes. */
let bare: LocalServer;
const received: string[] = [];

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  plain = await startHttpUpstream((req, res) => {
    received.push(`${req.method} ${req.url}`);
    res.end(`plain ${req.url}`);
  });
  switching = await startHttpUpstream(
    (_req, res) => res.end('not an upgrade'),
    (server) =>
      server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
        received.push(`upgrade ${req.url}`);
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n',
        );
        if (head.length > 0) socket.write(head.toString('latin1').toUpperCase());
        socket.on('data', (d: Buffer) => socket.write(d.toString('latin1').toUpperCase()));
      }),
  );
  silent = await startHttpUpstream(() => undefined);
  bare = await startHttpUpstream(
    (_req, res) => res.end('not an upgrade'),
    (server) =>
      server.on('upgrade', (_req: IncomingMessage, socket: Socket) => {
        socket.end('HTTP/1.1 101 Switching Protocols\r\n\r\nraw bytes');
      }),
  );
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await plain.close();
  await switching.close();
  await silent.close();
  await bare.close();
});

/** Send `bytes`; read until the ingress closes the connection. */
function exchange(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(t.httpPort, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.setTimeout(5000, () => socket.destroy(new Error('no close from the ingress')));
    socket.write(bytes, 'latin1');
  });
}

const statusLines = (text: string): string[] =>
  text.match(/HTTP\/1\.1 \d{3} [^\r\n]*(?=\r\n)/g) ?? [];
const UPGRADE = 'Connection: Upgrade\r\nUpgrade: anything\r\n';

describe('upgrades judged by the answer', () => {
  const policy = DENY_ADMIN;
  const path = 'lean';
  it('answers a 200 to an upgrade as HTTP and judges the requests pipelined behind it', async () => {
    const host = endpoints.publicEndpoint('http', plain.port, policy).hostname!;
    const before = received.length;
    const reply = await exchange(
      `GET /public HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\n` +
        `GET /admin/secret HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /after HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    expect(received.slice(before)).toEqual(['GET /public', 'GET /after']);
    expect(statusLines(reply)).toEqual([
      'HTTP/1.1 200 OK',
      'HTTP/1.1 403 Forbidden',
      'HTTP/1.1 200 OK',
    ]);
    expect(reply).toContain('plain /public');
    expect(reply).toContain('plain /after');
  });

  it('closes the stream of an upgrade answered 200 once the answer is relayed', async () => {
    const own = await startHttpUpstream((_req, res) => res.end('no upgrade here'));
    const host = endpoints.publicEndpoint('http', own.port, policy).hostname!;
    const socket = net.connect(t.httpPort, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\n`);
    await until(() => text.endsWith('no upgrade here'));
    // The client keeps its connection; the agent's side of the upgrade is let go of.
    await until(() => own.open === 0);
    expect(socket.destroyed).toBe(false);
    socket.destroy();
    await own.close();
  });

  it('relays raw only after a 101: bytes sent behind the upgrade reach the service then', async () => {
    const host = endpoints.publicEndpoint('http', switching.port, policy).hostname!;
    const socket = net.connect(t.httpPort, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\nhello `);
    await until(() => text.includes('HELLO '));
    socket.write('again');
    await until(() => text.includes('AGAIN'));
    expect(text).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/);
    expect(text).toContain('\r\n\r\nHELLO AGAIN');
    socket.destroy();
  });

  it('sends an upgrade’s body before the switch, and relays the new protocol after it', async () => {
    const host = endpoints.publicEndpoint('http', switching.port, policy).hostname!;
    const socket = net.connect(t.httpPort, '127.0.0.1');
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    // The service (Node's upgrade event) reads the body as the first bytes of the new protocol.
    socket.write(`POST /ws HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}Content-Length: 5\r\n\r\nhello`);
    await until(() => text.endsWith('HELLO'));
    socket.write('again');
    await until(() => text.endsWith('AGAIN'));
    expect(statusLines(text)).toEqual(['HTTP/1.1 101 Switching Protocols']);
    socket.destroy();
  });

  it('answers 502 to a 101 without Connection: Upgrade, and relays nothing after it', async () => {
    const host = endpoints.publicEndpoint('http', bare.port, policy).hostname!;
    const reply = await exchange(`GET /ws HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\n`);
    expect(statusLines(reply)).toEqual(['HTTP/1.1 502 Bad Gateway']);
    expect(reply).not.toContain('raw bytes');
  });

  it('refuses an upgrade to a denied path before the agent hears of it', async () => {
    const host = endpoints.publicEndpoint('http', switching.port, policy).hostname!;
    const before = received.length;
    const reply = await exchange(`GET /admin HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\nraw`);
    expect(statusLines(reply)).toEqual(['HTTP/1.1 403 Forbidden']);
    expect(received.slice(before)).toEqual([]);
  });

  it.each([
    ['FIN', ''],
    ['RST', ''],
    ['FIN', 'with a body'],
  ] as const)(
    'releases the stream when the client leaves (%s) while the answer is awaited %s',
    async (way, body) => {
      const host = endpoints.publicEndpoint('http', silent.port, policy).hostname!;
      const released = (): number =>
        metricValue(t.metrics, 'burrow_http_streams_released_total', { path });
      const before = released();
      const socket = net.connect(t.httpPort, '127.0.0.1');
      socket.on('error', () => undefined);
      const sent = body ? 'Content-Length: 4\r\n\r\nbody' : '\r\n';
      socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}${sent}`);
      await until(() => silent.open === 1);
      if (way === 'FIN') socket.end();
      else socket.resetAndDestroy();
      await until(() => silent.open === 0);
      expect(released()).toBe(before + 1);
    },
  );
});
