import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ErrorCode,
  FrameFlag,
  FrameType,
  decodeFrames,
  encodeFrameHeader,
} from '../src/protocol/muxado/frame.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import type { TestDatabase } from './support/stores.js';
import type { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  ingressCurl,
  type EdgePorts,
  startEdgeServer,
} from './support/edge-listeners.js';
import type { BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Inputs that once took the whole `burrow server` process down, sent to a real process as an
 * attacker would. After each attack the same process must still serve the API and carry an
 * agent's tunnel, and the attacker gets a clear error or a closed connection, nothing more.
 */

/** Everything a socket received until it closed (or `limitMs` passed: then `closed` is false). */
function untilClosed(socket: net.Socket, limitMs = 15_000) {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => {});
  return new Promise<{ closed: boolean; bytes: Buffer }>((resolve) => {
    const timer = setTimeout(
      () => resolve({ closed: false, bytes: Buffer.concat(chunks) }),
      limitMs,
    );
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ closed: true, bytes: Buffer.concat(chunks) });
    });
  });
}

const DEEP_POLICIES: [string, string][] = [
  ['nested JSON lists', '['.repeat(1000) + ']'.repeat(1000)],
  ['nested JSON objects', '{"a":'.repeat(700) + '1' + '}'.repeat(700)],
  ['YAML flow nesting', '{a: ['.repeat(500) + ']}'.repeat(500)],
  ['YAML compact sequences', '- '.repeat(1000) + 'x'],
];

describe('attacks on a burrow server process', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  let caPem: string;
  let web: LocalServer;
  let stalled: { name: string; result: Promise<{ closed: boolean }>; openedAt: number }[] = [];
  const sessions: ngrok.Session[] = [];
  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );

  /** The API answers and a new agent's tunnel carries a request: the process is whole. */
  async function expectServing(): Promise<void> {
    expect(server.process.exitCode).toBeNull();
    expect((await api.get('/bot_users')).status).toBe(200);
    const session = await connectNgrok(ports, caPem, await createAuthtoken(api));
    sessions.push(session);
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    expect(await curlUrl(listener.url()!, '/alive')).toMatchObject({ status: 200, text: 'alive' });
  }

  beforeAll(async () => {
    ({ db, ports, server, api, caFile, caPem } = await startEdgeServer('sqlite'));
    web = await startHttpUpstream((_req, res) => res.end('alive'));
    // Handshakes that stall: opened first so their deadline runs while the other tests do.
    const silent = net.connect(ports.agent, '127.0.0.1');
    const trickle = net.connect(ports.agent, '127.0.0.1');
    trickle.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]));
    const drip = setInterval(() => trickle.writable && trickle.write(Buffer.from([0x01])), 2000);
    trickle.once('close', () => clearInterval(drip));
    const ingress = net.connect(ports.https, '127.0.0.1');
    const openedAt = Date.now();
    stalled = [
      { name: 'agent listener, silent', result: untilClosed(silent, 30_000), openedAt },
      { name: 'agent listener, trickling', result: untilClosed(trickle, 30_000), openedAt },
      { name: 'HTTPS ingress, silent', result: untilClosed(ingress, 30_000), openedAt },
    ];
  }, 60_000);
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await web?.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it('closes only the connection that sends an oversized SYN frame before Auth', async () => {
    for (let i = 0; i < 5; i++) {
      const socket = tls.connect({ port: ports.agent, host: '127.0.0.1', ca: caPem });
      await once(socket, 'secureConnect');
      const received = untilClosed(socket);
      const header = encodeFrameHeader(FrameType.Data, FrameFlag.Syn, 3, 0xffffff);
      socket.write(Buffer.concat([header, Buffer.alloc(16 * 1024)]));
      const { closed, bytes } = await received;
      expect(closed).toBe(true);
      // Over --agent-max-frame-bytes (judged on the header, before the window): FrameSize.
      expect(decodeFrames(bytes).at(-1)).toMatchObject({
        type: 'goaway',
        code: ErrorCode.FrameSize,
      });
    }
    await expectServing();
  });

  it.each(DEEP_POLICIES)(
    'refuses a deeply nested traffic policy (%s) with 2236, every time',
    async (_name, value) => {
      for (let i = 0; i < 3; i++) {
        const res = await api.post('/edges/tcp', { traffic_policy: { value } });
        expect(res.status, res.text).toBe(400);
        expect(res.body).toMatchObject({
          error_code: 'ERR_NGROK_2236',
          details: { field: 'traffic_policy.value' },
        });
        expect(res.body.msg).toMatch(/more than 32 levels deep/);
        expect(res.text).not.toContain('[[[[');
      }
      expect((await api.get('/bot_users')).status).toBe(200);
    },
  );

  it('refuses a deeply nested traffic policy in an agent bind, and keeps serving', async () => {
    const session = await connectNgrok(ports, caPem, await createAuthtoken(api));
    sessions.push(session);
    for (let i = 0; i < 2; i++) {
      const bind = session
        .httpEndpoint()
        .trafficPolicy(DEEP_POLICIES[0]![1])
        .listenAndForward(`http://127.0.0.1:${web.port}`);
      await expect(bind).rejects.toThrow(/levels deep/);
    }
    await expectServing();
  });

  it('mints certificates only for names it may serve, not for any invented name', async () => {
    const handshake = (servername: string) =>
      new Promise<string>((resolve) => {
        const socket = tls.connect({ port: ports.https, host: '127.0.0.1', servername, ca: caPem });
        socket.once('secureConnect', () => {
          socket.destroy();
          resolve('ok');
        });
        socket.once('error', () => resolve('refused'));
      });
    expect(await handshake('random1.burrow.test')).toBe('ok');
    expect(await handshake('a.b.burrow.test')).toBe('refused');
    expect(await handshake('x.y.z.burrow.test')).toBe('refused');
    await expectServing();
  });

  it('closes stalled TLS handshakes on the agent listener and the HTTPS ingress', async () => {
    for (const { name, result, openedAt } of stalled) {
      const { closed } = await result;
      expect(closed, name).toBe(true);
      // The deadline is 10 s from the first byte; allow for a loaded machine, not for ever.
      expect(Date.now() - openedAt, name).toBeLessThan(30_000);
    }
    await expectServing();
  }, 40_000);
});
