import { once } from 'node:events';
import net from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { curl } from './support/curl.js';
import { freePort } from './support/server-process.js';

/**
 * Issue 27 item 6 and issue 36 item 5, as the attacks: a server under a low open-files limit (512:
 * Node's ESM loader itself needs more than 320 to start Burrow) is
 * flooded with idle (and half-closed) connections on the API port and on TCP endpoints, from one
 * address and from several; a new, unmodified @ngrok/ngrok agent must still connect and serve.
 * Before, one address's idle sockets on the API, or a few addresses' relays (capped per port),
 * held the process at its limit, and new agents failed their handshake.
 */

/** Client sockets a flood opened, and how many of them the server has closed so far. */
interface Flood {
  sockets: net.Socket[];
  closed(): number;
  destroy(): void;
}

/** Open `count` connections to `port` from `from`, `batch` at a time; `then` runs on each. */
async function flood(
  port: number,
  from: string[],
  count: number,
  then: (socket: net.Socket, index: number) => void = () => undefined,
): Promise<Flood> {
  const sockets: net.Socket[] = [];
  let closed = 0;
  for (let i = 0; i < count; i += 50) {
    const batch = Array.from({ length: Math.min(50, count - i) }, async (_, j) => {
      const socket = net.connect({
        port,
        host: '127.0.0.1',
        localAddress: from[(i + j) % from.length],
      });
      socket.on('error', () => undefined);
      socket.once('close', () => closed++);
      socket.resume();
      sockets.push(socket);
      await Promise.race([once(socket, 'connect'), once(socket, 'close')]);
      if (!socket.destroyed) then(socket, i + j);
    });
    await Promise.all(batch);
  }
  return { sockets, closed: () => closed, destroy: () => sockets.forEach((s) => s.destroy()) };
}

/** Resolves once `done()` holds, checking every 50 ms (the test's own timeout bounds it). */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await done())) await new Promise((r) => setTimeout(r, 50));
}

/** A cap the server lowered to fit its open-files limit, from its startup log line. */
function loweredCap(edge: EdgeServer, field: string): number {
  const line = edge.server.logs.find(
    (l) => l.msg === 'connection caps lowered to fit the open-files limit',
  );
  const entry = (line?.lowered as string[] | undefined)?.find((l) => l.startsWith(`${field}:`));
  expect(entry, `${field} in ${JSON.stringify(line)}`).toBeDefined();
  return Number(entry!.split('→')[1]);
}

/** `burrow_limit_refusals_total{limit}` as the API's /metrics shows it now. */
async function refusals(edge: EdgeServer, limit: string): Promise<number> {
  const text = (await edge.api.get('/metrics')).text;
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`burrow_limit_refusals_total{limit="${limit}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('listeners under a low open-files limit', () => {
  let edge: EdgeServer | undefined;
  let web: LocalServer | undefined;
  let silent: LocalServer | undefined;
  const sessions: ngrok.Session[] = [];
  const floods: Flood[] = [];
  afterEach(async () => {
    floods.splice(0).forEach((f) => f.destroy());
    await Promise.all(sessions.splice(0).map((s) => s.close().catch(() => undefined)));
    await web?.close();
    await silent?.close();
    await edge?.server.stop(20_000);
    await edge?.db.drop();
    edge = undefined;
  });

  /** A new agent connects (its token made before the flood) and its endpoint serves a request. */
  async function newAgentServes(token: string): Promise<void> {
    const session = await connectNgrok(edge!.ports, edge!.caPem, token);
    sessions.push(session);
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web!.port}`);
    const curlUrl = ingressCurl(
      () => edge!.ports,
      () => edge!.caFile,
    );
    expect(await curlUrl(listener.url()!, '/alive')).toMatchObject({ status: 200, text: 'alive' });
  }

  it("API flood: one address holds only its share, many hold only the API's; a new agent still connects and serves", async () => {
    edge = await startEdgeServer('sqlite', [], { openFilesLimit: 512 });
    web = await startHttpUpstream((_req, res) => res.end('alive'));
    const token = await createAuthtoken(edge.api);
    const apiPort = Number(new URL(edge.server.url).port);
    const apiTotal = loweredCap(edge, 'apiMaxConnections');
    const apiPerIp = loweredCap(edge, 'apiMaxConnectionsPerIp');

    // 600 idle sockets from one address, more than the whole process may open: all but its
    // share are closed at once, and the API still answers another address.
    const one = await flood(apiPort, ['127.0.0.9'], 600);
    floods.push(one);
    await until(() => one.closed() >= 600 - apiPerIp);
    expect((await edge.api.get('/credentials')).status).toBe(200);

    // Four more addresses fill the API's whole share; the agents' share is untouched.
    const many = await flood(
      apiPort,
      ['127.0.0.10', '127.0.0.11', '127.0.0.12', '127.0.0.13'],
      800,
    );
    floods.push(many);
    await until(() => one.closed() + many.closed() >= 1400 - apiTotal);
    await newAgentServes(token);

    one.destroy();
    many.destroy();
    await until(
      async () => (await edge!.api.get('/credentials').catch(() => undefined))?.status === 200,
    );
    expect(await refusals(edge, 'api_connections_per_ip')).toBeGreaterThan(0);
    expect(await refusals(edge, 'api_connections')).toBeGreaterThan(0);
  }, 120_000);

  it('the --metrics-listen listener is capped per address too, the scraper still served', async () => {
    const metricsPort = await freePort();
    edge = await startEdgeServer('sqlite', ['--metrics-listen', `127.0.0.1:${metricsPort}`]);
    const idle = await flood(metricsPort, ['127.0.0.9'], 10);
    floods.push(idle);
    await until(() => idle.closed() >= 10 - 4);
    const scrape = await curl([`http://127.0.0.1:${metricsPort}/metrics`]);
    expect(scrape.status).toBe(200);
    expect(scrape.text).toContain(
      'burrow_limit_refusals_total{limit="metrics_connections_per_ip"} 6',
    );
  });

  it('TCP endpoint flood from six addresses to three ports: the ingress holds only its share, half-closed relays end, a new agent connects and serves', async () => {
    edge = await startEdgeServer('sqlite', ['--relay-half-closed-timeout-ms', '1000'], {
      openFilesLimit: 1024,
    });
    web = await startHttpUpstream((_req, res) => res.end('alive'));
    // The service behind the endpoints reads and never answers or closes: relays stay open
    // until the edge ends them.
    silent = await startTcpUpstream((socket) => {
      socket.resume();
      socket.on('error', () => socket.destroy());
    });
    const token = await createAuthtoken(edge.api);
    const ports: number[] = [];
    // One session per endpoint, so the agent's own stream limit is not what refuses the flood.
    for (let i = 0; i < 3; i++) {
      const session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
      sessions.push(session);
      const listener = await session
        .tcpEndpoint()
        .listenAndForward(`tcp://127.0.0.1:${silent.port}`);
      ports.push(Number(new URL(listener.url()!).port));
    }
    const ingressTotal = loweredCap(edge, 'ingressMaxConnections');
    const addresses = [
      '127.0.0.21',
      '127.0.0.22',
      '127.0.0.23',
      '127.0.0.24',
      '127.0.0.25',
      '127.0.0.26',
    ];
    // 6 addresses × 3 ports × 60: more than the process may open. Every other one half-closes.
    const halfClosed = new Set<net.Socket>();
    const perPort = await Promise.all(
      ports.map((port) =>
        flood(port, addresses, 360, (socket, i) => {
          if (i % 2 === 1) return;
          halfClosed.add(socket);
          socket.end('request, then FIN');
        }),
      ),
    );
    floods.push(...perPort);
    const closed = () => perPort.reduce((sum, f) => sum + f.closed(), 0);
    await until(() => closed() >= 3 * 360 - ingressTotal);

    // While the flood holds the ingress's share, an agent connects.
    const session = await connectNgrok(edge.ports, edge.caPem, token);
    sessions.push(session);

    // The half-closed relays end after the configured timeout; the idle ones are held (an hour
    // by default) but within the ingress's share.
    await until(() => [...halfClosed].every((s) => s.destroyed));
    expect(await refusals(edge, 'relay_half_closed_timeout')).toBeGreaterThan(0);
    expect(await refusals(edge, 'ingress_connections')).toBeGreaterThan(0);
    const idleHeld = perPort.flatMap((f) => f.sockets).filter((s) => !s.destroyed).length;
    expect(idleHeld).toBeGreaterThan(0);
    expect(idleHeld).toBeLessThanOrEqual(ingressTotal);

    // With the half-closed relays gone, the new agent's endpoint serves.
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const curlUrl = ingressCurl(
      () => edge!.ports,
      () => edge!.caFile,
    );
    expect(await curlUrl(listener.url()!, '/alive')).toMatchObject({ status: 200, text: 'alive' });
  }, 180_000);
});
