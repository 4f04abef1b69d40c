import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  fakeTunnel,
  freePort,
  httpRequest,
  startHttpUpstream,
  startTcpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setup(): Promise<{ t: TestIngress; upstream: LocalServer }> {
  const t = await startTestIngress();
  const upstream = await startHttpUpstream((req, res) => {
    const ms = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('ms') ?? 0);
    setTimeout(() => res.end(`done after ${ms}`), ms);
  });
  t.registry.addTunnel(
    fakeTunnel({ proto: 'http', hostname: 'app.burrow.test', upstreamPort: upstream.port }),
  );
  cleanups.push(async () => {
    await t.close();
    await upstream.close();
  });
  return { t, upstream };
}

async function dialError(port: number): Promise<string | undefined> {
  const socket = connect(port, '127.0.0.1');
  return new Promise((resolve) => {
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
  });
}

describe('startIngress drain and close', () => {
  it('drains: stops accepting, closes idle keep-alive connections, lets open requests finish', async () => {
    const { t } = await setup();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    await httpRequest(t.httpPort, { host: 'app.burrow.test', agent });
    const idleSocket = Object.values(agent.freeSockets)[0]![0] as Socket;
    const idleClosed = once(idleSocket, 'close');

    const slow = new Promise<{ status: number; connection: string | undefined; body: string }>(
      (resolve, reject) => {
        const req = request(
          {
            port: t.httpPort,
            host: '127.0.0.1',
            path: '/?ms=400',
            headers: { Host: 'app.burrow.test' },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
            );
          },
        );
        req.on('error', reject);
        req.end();
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 100)); // the slow request is in flight

    const started = performance.now();
    const drained = t.ingress.drain(5000);
    await idleClosed;
    expect(performance.now() - started).toBeLessThan(300);
    expect(await dialError(t.httpPort)).toBe('ECONNREFUSED');
    expect(await dialError(t.httpsPort)).toBe('ECONNREFUSED');

    expect(await slow).toEqual({ status: 200, connection: 'close', body: 'done after 400' });
    await drained;
    const took = performance.now() - started;
    expect(took).toBeGreaterThan(250);
    expect(took).toBeLessThan(2000);
    agent.destroy();
  });

  it('cuts connections still open when the grace period is over', async () => {
    const { t } = await setup();
    const silent = await startTcpUpstream(() => undefined); // holds connections open forever
    cleanups.push(() => silent.close());
    const port = await freePort();
    t.registry.addTunnel(fakeTunnel({ proto: 'tcp', port, upstreamPort: silent.port }));
    await t.ingress.tcp.listening(port);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.resume();
    socket.write('hello');
    await new Promise((resolve) => setTimeout(resolve, 50));

    const started = performance.now();
    await t.ingress.drain(300);
    const took = performance.now() - started;
    expect(took).toBeGreaterThan(250);
    expect(took).toBeLessThan(1500);
    if (!socket.destroyed) await once(socket, 'close');
    expect(await dialError(port)).toBe('ECONNREFUSED');
  });

  it('close() cuts open requests at once', async () => {
    const { t } = await setup();
    const outcome = new Promise<string>((resolve) => {
      const req = request(
        {
          port: t.httpPort,
          host: '127.0.0.1',
          path: '/?ms=5000',
          headers: { Host: 'app.burrow.test' },
        },
        (res) => res.resume(),
      );
      req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      req.end();
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    await t.ingress.close();
    expect(await outcome).toBe('ECONNRESET');
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('fails to start, listening on nothing, when a port is taken', async () => {
    const squatter = createServer();
    squatter.listen(0, '127.0.0.1');
    await once(squatter, 'listening');
    const taken = (squatter.address() as AddressInfo).port;
    const httpPort = await freePort();
    await expect(
      startTestIngress({ httpListen: `127.0.0.1:${httpPort}`, httpsListen: `127.0.0.1:${taken}` }),
    ).rejects.toThrow(/EADDRINUSE/);
    expect(await dialError(httpPort)).toBe('ECONNREFUSED');
    squatter.close();
  });
});
