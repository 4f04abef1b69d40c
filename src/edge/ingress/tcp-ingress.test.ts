import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fakeTunnel,
  freePort,
  metricValue,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { until } from '../../../test/support/mux.js';
import { startEchoUpstream, startCountingUpstream } from '../../../test/support/tcp-upstreams.js';
import { LISTEN_RETRY_MS } from './tcp-ingress.js';

let t: TestIngress;
let echo: LocalServer;
let counter: LocalServer;

/** Connect to 127.0.0.1:port; resolves with the socket or rejects with the error code. */
async function dial(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await Promise.race([
    once(socket, 'connect'),
    once(socket, 'error').then(([err]: unknown[]) => {
      throw new Error((err as NodeJS.ErrnoException).code);
    }),
  ]);
  return socket;
}

/** Everything `socket` sends until it ends. */
async function readAll(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'end');
  return Buffer.concat(chunks);
}

beforeAll(async () => {
  t = await startTestIngress();
  echo = await startEchoUpstream();
  counter = await startCountingUpstream();
});

afterAll(async () => {
  await t.close();
  await echo.close();
  await counter.close();
});

describe('TCP endpoints', () => {
  it('listens when a tcp tunnel comes online and relays bytes both ways', async () => {
    const port = await freePort();
    const tunnel = fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port });
    t.registry.addTunnel(tunnel);
    await t.ingress.tcp.listening(port);
    expect(t.ingress.tcp.ports).toContain(port);

    const socket = await dial(port);
    const payload = randomBytes(4 * 1024 * 1024);
    socket.end(payload);
    const back = await readAll(socket);
    expect(back.equals(payload)).toBe(true);
    expect(tunnel.connects[0]).toMatchObject({ proto: 'tcp', edgeType: '', passthroughTls: false });
    expect(tunnel.connects[0]!.clientAddr).toMatch(/^127\.0\.0\.1:\d+$/);
    await once(socket, 'close');
    const endpoint = tunnel.url!;
    expect(metricValue(t.metrics, 'burrow_bytes_received_total', { endpoint })).toBe(
      payload.length,
    );
    expect(metricValue(t.metrics, 'burrow_bytes_sent_total', { endpoint })).toBe(payload.length);
    expect(metricValue(t.metrics, 'burrow_connections_total', { endpoint })).toBe(1);
    t.registry.removeTunnel(tunnel.id);
  });

  it('keeps half-closed connections going in the other direction', async () => {
    const port = await freePort();
    const tunnel = fakeTunnel({ proto: 'tcp', port, upstreamPort: counter.port });
    t.registry.addTunnel(tunnel);
    await t.ingress.tcp.listening(port);
    const socket = await dial(port);
    socket.write(Buffer.alloc(1024 * 1024));
    socket.end(); // our FIN; the answer must still arrive
    expect((await readAll(socket)).toString()).toBe(`received ${1024 * 1024}`);
    t.registry.removeTunnel(tunnel.id);
  });

  it('closes the port when the tunnel goes offline, but not across a takeover', async () => {
    const port = await freePort();
    const first = fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port });
    t.registry.addTunnel(first);
    await t.ingress.tcp.listening(port);

    // The same agent resuming: the old tunnel is replaced in one step; the port must stay open.
    const second = fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port });
    t.registry.addTunnel(second, { takeoverFrom: first.sessionId });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const socket = await dial(port);
    socket.end('still here');
    expect((await readAll(socket)).toString()).toBe('still here');
    expect(second.connects).toHaveLength(1);
    expect(first.connects).toHaveLength(0);

    t.registry.removeTunnel(second.id);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await expect(dial(port)).rejects.toThrow('ECONNREFUSED');
    expect(t.ingress.tcp.ports).not.toContain(port);
  });

  it('closes the public connection at once when the agent cannot be reached', async () => {
    const port = await freePort();
    const tunnel = fakeTunnel({
      proto: 'tcp',
      port,
      connect: () => Promise.reject(new Error('session closed')),
    });
    t.registry.addTunnel(tunnel);
    await t.ingress.tcp.listening(port);
    const socket = await dial(port);
    socket.resume();
    const started = performance.now();
    await once(socket, 'close');
    expect(performance.now() - started).toBeLessThan(1000);
    t.registry.removeTunnel(tunnel.id);
  });

  it('survives a port that something else holds, and listens once it is free again', async () => {
    const squatter = createServer();
    squatter.listen(0, '127.0.0.1');
    await once(squatter, 'listening');
    const port = (squatter.address() as { port: number }).port;
    const tunnel = fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port });
    t.registry.addTunnel(tunnel);
    try {
      await t.ingress.tcp.listening(port);
      expect(t.ingress.tcp.ports).not.toContain(port);
      squatter.close();
      await once(squatter, 'close');
      // Tried again every LISTEN_RETRY_MS (2 s).
      await until(() => t.ingress.tcp.ports.includes(port), 3 * LISTEN_RETRY_MS);
      await t.ingress.tcp.listening(port);
      const socket = await dial(port);
      socket.end('again');
      expect((await readAll(socket)).toString()).toBe('again');
    } finally {
      t.registry.removeTunnel(tunnel.id);
    }
  });
});
