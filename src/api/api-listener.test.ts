import { once } from 'node:events';
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { gateConnections, RefusalLog } from '../edge/listeners/connection-gate.js';
import { EdgeMetrics } from '../edge/metrics/metrics.js';
import { buildApi } from './app.js';

/** Everything a socket received until the server closed it. */
function untilClosed(socket: net.Socket): Promise<string> {
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => undefined);
  return new Promise((resolve) => socket.once('close', () => resolve(received)));
}

/**
 * The API and dashboard listener as `burrow server` sets it up (issue 27 item 6): connections that
 * send nothing, trickle their headers or idle between requests are closed soon, and the listener
 * is capped in all and per address, the newest connection refused.
 */
describe('the API listener', () => {
  let base: TestApi;
  let app: FastifyInstance;
  let port: number;
  const metrics = new EdgeMetrics();
  beforeAll(async () => {
    base = await createTestApi('sqlite');
    app = await buildApi({
      repos: base.repos,
      publicApiUrl: 'http://127.0.0.1',
      rateLimit: { max: 0, windowSeconds: 60 },
      timeouts: { headersMs: 300, idleMs: 300 },
    });
    gateConnections(
      app.server,
      { name: 'api', maxTotal: 4, maxPerIp: 2 },
      new RefusalLog(undefined, metrics),
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await app.close();
    await base.close();
  });

  const connect = async (from = '127.0.0.1'): Promise<net.Socket> => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
    await once(socket, 'connect');
    return socket;
  };

  it('closes a connection that never sends a request', async () => {
    const silent = await connect();
    expect(await untilClosed(silent)).not.toContain('200');
  });

  it('answers 408 to headers that trickle in, and closes', async () => {
    const trickle = await connect();
    const closed = untilClosed(trickle);
    trickle.write('GET /healthz HTTP/1.1\r\nHost: api\r\n');
    const drip = setInterval(() => trickle.writable && trickle.write('X-Slow: 1\r\n'), 50);
    const received = await closed;
    clearInterval(drip);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes an idle keep-alive connection after its last answer', async () => {
    const keepAlive = await connect();
    const closed = untilClosed(keepAlive);
    keepAlive.write('GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n');
    expect(await closed).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('refuses the newest connection over the per-address and the total cap, keeps the rest', async () => {
    const first = await connect('127.0.0.2');
    const second = await connect('127.0.0.2');
    const third = await connect('127.0.0.2');
    expect(await untilClosed(third)).toBe('');
    const other = await connect('127.0.0.3');
    const another = await connect('127.0.0.3');
    const overTotal = await connect('127.0.0.4');
    expect(await untilClosed(overTotal)).toBe('');
    const served = untilClosed(first);
    first.write('GET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n');
    expect(await served).toMatch(/^HTTP\/1\.1 200 /);
    expect(metrics.limitRefusals.with({ limit: 'api_connections_per_ip' }).value).toBe(1);
    expect(metrics.limitRefusals.with({ limit: 'api_connections' }).value).toBe(1);
    for (const socket of [second, other, another]) socket.destroy();
  });
});
