import { once } from 'node:events';
import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../core/limits.js';
import { PROXY_V2_SIGNATURE } from '../../protocol/proxy-protocol.js';
import {
  fakeTunnel,
  freePort,
  listenLocal,
  metricValue,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { startCountingUpstream } from '../../../test/support/tcp-upstreams.js';
import { createTestRepositories } from '../../../test/support/api.js';
import { edgeFixtures } from '../../../test/support/edge-fixtures.js';
import { labeledFake } from '../../../test/support/edge-traffic.js';
import { createTestDatabase } from '../../../test/support/stores.js';
import { openStore } from '../../store/index.js';
import { EdgeRoutes } from '../binds/edge-routes.js';

/** Send `prefix` and a GET for `host` in one write; the raw reply, '' when the server hung up. */
async function exchange(socket: Socket | TLSSocket, host: string, prefix = ''): Promise<string> {
  socket.write(`${prefix}GET /who HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  let text = '';
  socket.setEncoding('utf8').on('data', (c: string) => (text += c));
  await Promise.race([once(socket, 'close'), once(socket, 'end')]);
  return text;
}

function dial(port: number): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  return once(socket, 'connect').then(() => socket);
}

function v2Header(ip: number[], port: number): Buffer {
  const fixed = Buffer.from([0x21, 0x11, 0x00, 0x0c]);
  const block = Buffer.alloc(12);
  Buffer.from(ip).copy(block, 0);
  Buffer.from([10, 0, 0, 1]).copy(block, 4);
  block.writeUInt16BE(port, 8);
  block.writeUInt16BE(443, 10);
  return Buffer.concat([PROXY_V2_SIGNATURE, fixed, block]);
}

describe('ingress with --ingress-proxy-protocol 1', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  let plain: FakeTunnel;
  let secure: FakeTunnel;
  beforeAll(async () => {
    upstream = await listenLocal(
      http.createServer((req, res) => res.end(`xff=${String(req.headers['x-forwarded-for'])}`)),
    );
    t = await startTestIngress({
      limits: { ...DEFAULT_LIMITS, ingressProxyProtocol: 1, tlsHandshakeTimeoutMs: 500 },
    });
    plain = fakeTunnel({ proto: 'http', hostname: 'pp.burrow.test', upstreamPort: upstream.port });
    secure = fakeTunnel({
      proto: 'https',
      hostname: 'pps.burrow.test',
      upstreamPort: upstream.port,
    });
    t.registry.addTunnel(plain);
    t.registry.addTunnel(secure);
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  it('HTTP with a v1 header: X-Forwarded-For and the agent see the client, not the balancer', async () => {
    const socket = await dial(t.httpPort);
    // Header and request in one packet: the bytes after the header reach the HTTP parser.
    const reply = await exchange(
      socket,
      'pp.burrow.test',
      'PROXY TCP4 203.0.113.7 10.0.0.1 51234 80\r\n',
    );
    expect(reply).toMatch(/^HTTP\/1\.1 200/);
    expect(reply).toContain('xff=203.0.113.7');
    expect(plain.connects.at(-1)?.clientAddr).toBe('203.0.113.7:51234');
  });

  it('HTTPS with a v2 header sent with the first TLS bytes', async () => {
    const raw = await dial(t.httpsPort);
    raw.write(v2Header([198, 51, 100, 9], 40000));
    const socket = tlsConnect({ socket: raw, servername: 'pps.burrow.test', ca: t.ca.certPem });
    await once(socket, 'secureConnect');
    const reply = await exchange(socket, 'pps.burrow.test');
    expect(reply).toContain('xff=198.51.100.9');
    expect(secure.connects.at(-1)?.clientAddr).toBe('198.51.100.9:40000');
  });

  it('refuses connections without a valid header: closed, counted, never served', async () => {
    const refusals = () =>
      metricValue(t.metrics, 'burrow_limit_refusals_total', { limit: 'ingress_proxy_protocol' });
    const before = refusals();
    const noHeader = await dial(t.httpPort);
    expect(await exchange(noHeader, 'pp.burrow.test')).toBe('');
    const bad = await dial(t.httpPort);
    bad.write('PROXY TCP4 not-an-ip 10.0.0.1 1 2\r\n');
    expect(await exchange(bad, 'pp.burrow.test')).toBe('');
    // Silent ones are closed after the deadline, not held open.
    const silent = await dial(t.httpsPort);
    const started = Date.now();
    await once(silent, 'close');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(refusals()).toBe(before + 3);
  });

  it('TCP endpoint ports too: the header is read, the rest relayed half-open; none, refused', async () => {
    // Answers after the client's FIN: half-close must travel through the front.
    const counter = await startCountingUpstream();
    const port = await freePort();
    const tcp = fakeTunnel({ proto: 'tcp', port, upstreamPort: counter.port });
    t.registry.addTunnel(tcp);
    try {
      await t.ingress.tcp.listening(port);
      const socket = await dial(port);
      socket.write(Buffer.concat([v2Header([192, 0, 2, 44], 5555), Buffer.alloc(1000)]));
      socket.end();
      let text = '';
      socket.setEncoding('utf8').on('data', (c: string) => (text += c));
      await once(socket, 'end');
      expect(text).toBe('received 1000');
      expect(tcp.connects.at(-1)?.clientAddr).toBe('192.0.2.44:5555');

      const refusals = () =>
        metricValue(t.metrics, 'burrow_limit_refusals_total', { limit: 'ingress_proxy_protocol' });
      const before = refusals();
      const bare = await dial(port);
      bare.write('hello');
      await once(bare, 'close');
      expect(refusals()).toBe(before + 1);
      expect(tcp.connects).toHaveLength(1);
    } finally {
      t.registry.removeTunnel(tcp.id);
      await counter.close();
    }
  });

  it('TCP edge hostports too: the agent sees the client the header names', async () => {
    const db = await createTestDatabase('sqlite');
    const store = await openStore({ database: db.database, dataDir: db.dataDir });
    const repos = createTestRepositories(store);
    const counter = await startCountingUpstream();
    const runtime = new EdgeRoutes({ repos, registry: t.registry });
    const tunnel = labeledFake({ edge: 'pp' }, () => counter.port);
    try {
      const port = await freePort();
      const { addr } = await edgeFixtures(store).reservedAddr(port);
      const edge = await repos.edges.create('tcp', { hostports: [addr] });
      const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'pp' } });
      await repos.edges.setModule('tcp', edge.id, 'backend', { backend_id: backend.id });
      t.registry.addTunnel(tunnel);
      await runtime.start();
      await t.ingress.tcp.listening(port);
      const socket = await dial(port);
      socket.write(Buffer.concat([v2Header([192, 0, 2, 77], 6000), Buffer.alloc(10)]));
      socket.end();
      let text = '';
      socket.setEncoding('utf8').on('data', (c: string) => (text += c));
      await once(socket, 'end');
      // The header was read, not relayed: the service got the 10 bytes after it.
      expect(text).toBe('received 10');
      expect(tunnel.connects.at(-1)?.clientAddr).toBe('192.0.2.77:6000');
    } finally {
      t.registry.removeTunnel(tunnel.id);
      runtime.close();
      await counter.close();
      await store.close();
      await db.drop();
    }
  });
});
