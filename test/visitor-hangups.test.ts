import { readdirSync } from 'node:fs';
import net from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import type { TestDatabase } from './support/stores.js';
import type { CurlApi } from './support/curl.js';
import { createAuthtoken, type EdgePorts, startEdgeServer } from './support/edge-listeners.js';
import type { BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { until } from './support/mux.js';

/**
 * Issue 36, item 2, as the attack: visitors send requests to a service that never answers, then
 * hang up (FIN or RST). The edge must give up each request's stream to the agent at once: the
 * unmodified @ngrok/ngrok agent then closes its connection to the service, which the service
 * sees; the edge's descriptors go back to where they were, and /metrics counts the releases.
 */

const VISITORS = 60;

/** A policy with both HTTP phases, so that the release is also shown with a response awaited by one. */
const BOTH_PHASES = `on_http_request:
  - actions: [{type: add-headers, config: {headers: {x-seen: "1"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-answered: "1"}}}]
`;

/** Open descriptors of process `pid`. */
function descriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** The sum of `burrow_http_streams_released_total` for `path`, from /metrics. */
async function released(metricsUrl: string, path: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('burrow_http_streams_released_total{')) continue;
    if (!line.includes(`path="${path}"`)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** A service that never answers, and what it saw: requests, and the connections still open. */
interface SlowService {
  server: LocalServer;
  arrived: number;
  sockets: Set<net.Socket>;
}

async function slowService(): Promise<SlowService> {
  const service: SlowService = { server: undefined as never, arrived: 0, sockets: new Set() };
  service.server = await startHttpUpstream(
    () => {
      service.arrived++;
    },
    (http) =>
      http.on('connection', (socket: net.Socket) => {
        service.sockets.add(socket);
        socket.once('close', () => service.sockets.delete(socket));
      }),
  );
  return service;
}

describe('visitors who hang up release their streams to the agent', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caPem: string;
  let session: ngrok.Session;
  const services: SlowService[] = [];

  beforeAll(async () => {
    ({ db, ports, server, api, caPem } = await startEdgeServer('sqlite'));
    session = await connectNgrok(ports, caPem, await createAuthtoken(api));
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    for (const service of services) await service.server.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it.each([
    ['without a policy', 'FIN'],
    ['without a policy', 'RST'],
    ['with a policy', 'FIN'],
    ['with a policy', 'RST'],
  ] as const)(
    '%s, %s from the visitor closes the stream to the agent',
    async (policy, way) => {
      const path = 'lean';
      const service = await slowService();
      services.push(service);
      const endpoint = session.httpEndpoint();
      if (policy === 'with a policy') endpoint.trafficPolicy(BOTH_PHASES);
      const listener = await endpoint.listenAndForward(`http://127.0.0.1:${service.server.port}`);
      const host = new URL(listener.url()!).hostname;
      const pid = server.process.pid!;
      const baseline = descriptors(pid);
      const metricsUrl = `${server.url}/metrics`;
      const releasedBefore = await released(metricsUrl, path);

      const visitors: net.Socket[] = [];
      for (let i = 0; i < VISITORS; i++) {
        const socket = net.connect(ports.http, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(`GET /slow/${i} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        visitors.push(socket);
      }
      // Every request reached the service, which holds them all unanswered.
      await until(() => service.arrived === VISITORS, 20_000);
      expect(service.sockets.size).toBe(VISITORS);

      for (const socket of visitors) {
        if (way === 'FIN') socket.end();
        else socket.resetAndDestroy();
      }
      // The agent closes its connection to the service once the edge resets the stream.
      await until(() => service.sockets.size === 0, 10_000);
      // The public sockets are closed on the edge too: descriptors back to their baseline.
      await until(() => descriptors(pid) <= baseline + 5, 10_000);
      expect(await released(metricsUrl, path)).toBe(releasedBefore + VISITORS);
      for (const socket of visitors) socket.destroy();
      await listener.close();
    },
    60_000,
  );
});
