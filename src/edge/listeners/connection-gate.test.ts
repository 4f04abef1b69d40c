import { once } from 'node:events';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { RpcError } from '../../protocol/index.js';
import { connectTestAgent, startTestAgentEdge } from '../../../test/support/agent-edge.js';
import { clientKey, ConnectionGate, gateConnections, RefusalLog } from './connection-gate.js';
import { EdgeMetrics } from '../metrics/metrics.js';
import { proxyProtocolFront } from './proxy-protocol-front.js';

describe('listener limits', () => {
  const servers: net.Server[] = [];
  afterAll(() => servers.forEach((s) => s.close()));

  it('closes connections over the per-IP cap at once, counts and logs them once a minute, keeps the rest', async () => {
    const metrics = new EdgeMetrics();
    const warnings: unknown[] = [];
    const logger = { warn: (o: unknown) => warnings.push(o) } as unknown as ConstructorParameters<
      typeof RefusalLog
    >[0];
    const server = net.createServer((s) => s.write('hi'));
    servers.push(server);
    gateConnections(
      server,
      { name: 'ingress', maxTotal: 100, maxPerIp: 2 },
      new RefusalLog(logger, metrics),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    const open = async () => {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      const first = await Promise.race([
        once(socket, 'data').then(() => 'served'),
        once(socket, 'close').then(() => 'closed'),
      ]);
      return { socket, first };
    };
    const a = await open();
    const b = await open();
    const c = await open();
    const d = await open();
    expect([a.first, b.first, c.first, d.first]).toEqual(['served', 'served', 'closed', 'closed']);
    expect(metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(2);
    expect(warnings).toHaveLength(1);
    a.socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect((await open()).first).toBe('served');
    for (const x of [b, c, d]) x.socket.destroy();
  });

  it('counts an address once over every server the gate is attached to, refusing the newest', async () => {
    const metrics = new EdgeMetrics();
    const gate = new ConnectionGate(
      { name: 'ingress', maxTotal: 3, maxPerIp: 2 },
      new RefusalLog(undefined, metrics),
    );
    const ports: number[] = [];
    for (let i = 0; i < 3; i++) {
      const server = net.createServer((s) => s.write('hi'));
      servers.push(server);
      gate.attach(server);
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      ports.push((server.address() as net.AddressInfo).port);
    }
    const open = async (port: number, from = '127.0.0.1') => {
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
      socket.on('error', () => undefined);
      const first = await Promise.race([
        once(socket, 'data').then(() => 'served'),
        once(socket, 'close').then(() => 'closed'),
      ]);
      return { socket, first };
    };
    // Two ports, one connection each: the address's budget of two is spent on both together.
    const a = await open(ports[0]!);
    const b = await open(ports[1]!);
    const c = await open(ports[2]!);
    expect([a.first, b.first, c.first]).toEqual(['served', 'served', 'closed']);
    expect(gate.openFrom('127.0.0.1')).toBe(2);
    // Another address still gets in, up to the total of three over all ports.
    const d = await open(ports[2]!, '127.0.0.2');
    const e = await open(ports[0]!, '127.0.0.3');
    expect([d.first, e.first]).toEqual(['served', 'closed']);
    expect(metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(1);
    expect(metrics.limitRefusals.with({ limit: 'ingress_connections' }).value).toBe(1);
    expect(gate.open).toBe(3);
    for (const x of [a, b, c, d, e]) x.socket.destroy();
  });

  it('behind a PROXY protocol front: waiting connections count in the total, each client by its real address', async () => {
    const metrics = new EdgeMetrics();
    const gate = new ConnectionGate(
      { name: 'ingress', maxTotal: 3, maxPerIp: 1 },
      new RefusalLog(undefined, metrics),
    );
    const inner = net.createServer((s) => s.write('hi'));
    const outer = proxyProtocolFront(inner, { timeoutMs: 60_000 });
    gate.attach(inner);
    gate.attach(outer, { perAddress: false });
    servers.push(inner, outer);
    outer.listen(0, '127.0.0.1');
    await once(outer, 'listening');
    const port = (outer.address() as net.AddressInfo).port;
    const connectAs = async (client?: string) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      await once(socket, 'connect');
      if (client) socket.write(`PROXY TCP4 ${client} 192.0.2.1 4000 80\r\n`);
      return socket;
    };
    const servedOrClosed = (socket: net.Socket) =>
      Promise.race([
        once(socket, 'data').then(() => 'served'),
        once(socket, 'close').then(() => 'closed'),
      ]);
    // Two clients behind one balancer address: each within its own per-address budget.
    const a = await connectAs('203.0.113.1');
    const b = await connectAs('203.0.113.2');
    expect([await servedOrClosed(a), await servedOrClosed(b)]).toEqual(['served', 'served']);
    // The first client again: over its own budget, however many the balancer carries.
    const again = await connectAs('203.0.113.1');
    expect(await servedOrClosed(again)).toBe('closed');
    // A connection still waiting for its header holds a place in the total; the next one is refused.
    const waiting = await connectAs();
    const over = await connectAs('203.0.113.3');
    expect(await servedOrClosed(over)).toBe('closed');
    expect(metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(1);
    expect(metrics.limitRefusals.with({ limit: 'ingress_connections' }).value).toBe(1);
    waiting.destroy();
    await once(waiting, 'close');
    while (gate.open > 2) await new Promise((r) => setTimeout(r, 10));
    expect(await servedOrClosed(await connectAs('203.0.113.3'))).toBe('served');
    for (const s of [a, b]) s.destroy();
  });

  it('refuses Auth beyond the sessions a credential may hold, with ERR_NGROK_108', async () => {
    const edge = await startTestAgentEdge('sqlite', { limits: { maxSessionsPerCredential: 1 } });
    try {
      const token = await edge.token();
      const first = await connectTestAgent(edge);
      await first.auth({ AuthToken: token });
      const second = await connectTestAgent(edge);
      const err = await second.auth({ AuthToken: token }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RpcError);
      expect((err as RpcError).errorCode).toBe('ERR_NGROK_108');
      expect(
        edge.metrics.limitRefusals.with({ limit: 'agent_sessions_per_credential' }).value,
      ).toBe(1);
      first.close();
      second.close();
    } finally {
      await edge.close();
    }
  });
});

describe('clientKey', () => {
  it('counts IPv4 addresses each on their own and IPv6 ones by /64', () => {
    expect(clientKey('192.0.2.7')).toBe('192.0.2.7');
    expect(clientKey('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(clientKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
  });
});
