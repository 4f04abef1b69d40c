/**
 * The ingress over real multiplexed streams (MuxStream, a plain Duplex with none of net.Socket's
 * methods), which is what agent sessions hand it: the edge's session opens one stream per proxied
 * connection and the "agent" side pipes each one to the local service.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MuxSession } from '../../protocol/muxado/session.js';
import {
  DOWNLOAD_BLOCK,
  MB,
  startTestUpstream,
  type TestUpstream,
} from '../../../test/support/http-upstream.js';
import {
  fakeTunnel,
  freePort,
  httpRequest,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { startCountingUpstream } from '../../../test/support/tcp-upstreams.js';
import { sessionPair } from '../../../test/support/mux.js';

let t: TestIngress;
let upstream: TestUpstream;
let counter: LocalServer;
let edgeSide: MuxSession;
let agentSide: MuxSession;
/** Where the agent side forwards the next streams. */
let forwardTo = 0;

beforeAll(async () => {
  t = await startTestIngress();
  upstream = await startTestUpstream();
  counter = await startCountingUpstream();
  const pair = await sessionPair();
  // The edge opens streams to the agent; the agent accepts them.
  edgeSide = pair.server;
  agentSide = pair.client;
  agentSide.on('stream', (stream: Duplex) => {
    const service: Socket = connect({ port: forwardTo, host: '127.0.0.1', allowHalfOpen: true });
    stream.pipe(service);
    service.pipe(stream);
    service.on('error', () => stream.destroy());
    stream.on('error', () => service.destroy());
  });
});

afterAll(async () => {
  await t.close();
  edgeSide.close();
  agentSide.close();
  await upstream.close();
  await counter.close();
});

function muxTunnel(options: { proto: 'http' | 'tcp'; hostname?: string; port?: number }) {
  return fakeTunnel({ ...options, connect: async () => edgeSide.openStream() });
}

describe('ingress over multiplexed tunnel streams', () => {
  it('serves keep-alive HTTP requests over one reused stream', async () => {
    forwardTo = upstream.port;
    const tunnel = muxTunnel({ proto: 'http', hostname: 'mux.burrow.test' });
    t.registry.addTunnel(tunnel);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 5; i++) {
      const reply = await httpRequest(t.httpPort, {
        host: 'mux.burrow.test',
        path: '/echo',
        agent,
      });
      expect(JSON.parse(reply.body).headers['x-forwarded-for']).toBe('127.0.0.1');
    }
    agent.destroy();
    expect(tunnel.connects).toHaveLength(1);
    t.registry.removeTunnel(tunnel.id);
  });

  it('streams a 20 MB download through a stream intact', async () => {
    forwardTo = upstream.port;
    const tunnel = muxTunnel({ proto: 'http', hostname: 'muxdl.burrow.test' });
    t.registry.addTunnel(tunnel);
    const expected = createHash('sha256');
    for (let i = 0; i < (20 * MB) / DOWNLOAD_BLOCK.length; i++) expected.update(DOWNLOAD_BLOCK);
    const sha256 = await new Promise<string>((resolve, reject) => {
      const req = request(
        {
          port: t.httpPort,
          host: '127.0.0.1',
          path: '/download?mb=20',
          headers: { Host: 'muxdl.burrow.test' },
        },
        (res) => {
          const hash = createHash('sha256');
          res.on('data', (c: Buffer) => hash.update(c));
          res.on('end', () => resolve(hash.digest('hex')));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(sha256).toBe(expected.digest('hex'));
    t.registry.removeTunnel(tunnel.id);
  });

  it('relays a TCP connection with half-close', async () => {
    forwardTo = counter.port;
    const port = await freePort();
    const tunnel = muxTunnel({ proto: 'tcp', port });
    t.registry.addTunnel(tunnel);
    await t.ingress.tcp.listening(port);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.end(Buffer.alloc(3 * MB));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    await once(socket, 'end');
    expect(answer).toBe(`received ${3 * MB}`);
    t.registry.removeTunnel(tunnel.id);
  });
});
