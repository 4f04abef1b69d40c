/**
 * The keep-alive pool of tunnel streams against an agent that half-closes streams the way real
 * agents do: the agent side pipes each stream to its local service with allowHalfOpen, so when
 * the service closes an idle keep-alive connection, the stream gets a FIN and nothing else.
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MuxSession } from '../../../protocol/muxado/session.js';
import {
  fakeTunnel,
  httpRequest,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { sessionPair, until } from '../../../../test/support/mux.js';
import { TunnelAgent, type TunnelRequestArgs } from './tunnel-agent.js';

/** The service's idle keep-alive timeout: short, so the test does not wait for Node's 5 s. */
const SERVICE_KEEP_ALIVE_MS = 200;

let t: TestIngress;
let service: LocalServer;
let edgeSide: MuxSession;
let agentSide: MuxSession;

beforeAll(async () => {
  t = await startTestIngress();
  service = await startHttpUpstream(
    (req, res) => {
      let bytes = 0;
      req.on('data', (c: Buffer) => (bytes += c.length));
      req.on('end', () => res.end(`${req.method} ${req.url} ${bytes}`));
    },
    (server) => (server.keepAliveTimeout = SERVICE_KEEP_ALIVE_MS),
  );
  const pair = await sessionPair();
  edgeSide = pair.server;
  agentSide = pair.client;
  agentSide.on('stream', (stream: Duplex) => {
    const local = connect({ port: service.port, host: '127.0.0.1', allowHalfOpen: true });
    stream.pipe(local);
    local.pipe(stream);
    local.on('error', () => stream.destroy());
    stream.on('error', () => local.destroy());
  });
});

afterAll(async () => {
  await t.close();
  edgeSide.close();
  agentSide.close();
  await service.close();
});

function muxTunnel(hostname: string) {
  return fakeTunnel({ proto: 'http', hostname, connect: async () => edgeSide.openStream() });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('TunnelAgent keep-alive pool', () => {
  it('drops a pooled stream once the agent ends it', async () => {
    const tunnel = muxTunnel('pool.burrow.test');
    const agent = new TunnelAgent(tunnel);
    const proxyInfo = {
      clientAddr: '203.0.113.5:4000',
      proto: 'http',
      edgeType: '',
      passthroughTls: false,
    } as const;
    const get = () =>
      new Promise<string>((resolve, reject) => {
        const args: TunnelRequestArgs = { agent, path: '/x', headers: { host: 'x' }, proxyInfo };
        const req = request(args, (res: IncomingMessage) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += String(c)));
          res.on('end', () => resolve(body));
        });
        req.on('error', reject);
        req.end();
      });
    expect(await get()).toBe('GET /x 0');
    const name = agent.getName({ proxyInfo } as TunnelRequestArgs);
    await until(() => (agent.freeSockets[name]?.length ?? 0) === 1);
    // The service times the idle connection out; the agent passes that on as a FIN.
    await until(() => agent.freeSockets[name] === undefined, 3000);
    expect(await get()).toBe('GET /x 0');
    expect(tunnel.connects).toHaveLength(2);
    agent.destroy();
  });

  it('serves a request with a body on a public keep-alive connection after the service closed its idle side', async () => {
    const tunnel = muxTunnel('idle.burrow.test');
    t.registry.addTunnel(tunnel);
    const publicAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const first = await httpRequest(t.httpPort, { host: 'idle.burrow.test', agent: publicAgent });
    expect(first).toMatchObject({ status: 200, body: 'GET / 0' });
    // Node closes idle connections a little after keepAliveTimeout (it adds a safety buffer).
    await until(() => service.open === 0, 5000);
    await pause(50);
    // A body is never retried on another stream: this only works if the stale one was dropped.
    const started = Date.now();
    const second = await httpRequest(t.httpPort, {
      host: 'idle.burrow.test',
      method: 'POST',
      path: '/after-idle',
      body: 'x'.repeat(1000),
      agent: publicAgent,
    });
    expect(second).toMatchObject({ status: 200, body: 'POST /after-idle 1000' });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(tunnel.connects).toHaveLength(2);
    publicAgent.destroy();
    t.registry.removeTunnel(tunnel.id);
  });
});
