import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../core/limits.js';
import {
  fakeTunnel,
  freePort,
  startTcpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { startEchoUpstream } from '../../../test/support/tcp-upstreams.js';

/** A connection to 127.0.0.1:`port` from `from`, once connected; refusals read as a close. */
async function connectFrom(port: number, from = '127.0.0.1'): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => {});
  await once(socket, 'connect');
  return socket;
}

/** Whether the edge served `socket` (echoed a byte) or closed it. */
async function servedOrClosed(socket: Socket): Promise<'served' | 'closed'> {
  socket.write('x');
  return Promise.race([
    once(socket, 'data').then(() => 'served' as const),
    once(socket, 'close').then(() => 'closed' as const),
  ]);
}

describe('TCP endpoint ports and the ingress connection caps', () => {
  let t: TestIngress;
  let echo: LocalServer;
  beforeAll(async () => {
    t = await startTestIngress({ limits: { ...DEFAULT_LIMITS, ingressMaxConnectionsPerIp: 2 } });
    echo = await startEchoUpstream();
  });
  afterAll(async () => {
    await t.close();
    await echo.close();
  });

  async function tcpEndpoint(): Promise<number> {
    const port = await freePort();
    t.registry.addTunnel(fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port }));
    await t.ingress.tcp.listening(port);
    return port;
  }

  it('closes a third connection from one address while two stay served', async () => {
    const port = await tcpEndpoint();
    const open: Socket[] = [];
    for (let i = 0; i < 2; i++) open.push(await connectFrom(port));
    const third = connect(port, '127.0.0.1');
    third.on('error', () => {});
    third.resume();
    await once(third, 'close');
    open[0]!.write('still served');
    const [echoed] = (await once(open[0]!, 'data')) as [Buffer];
    expect(String(echoed)).toBe('still served');
    expect(t.metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(1);
    for (const socket of open) {
      socket.destroy();
      await once(socket, 'close');
    }
  });

  it("counts an address's connections over every port together: more endpoints give it no more", async () => {
    const refusedBefore = t.metrics.limitRefusals.with({
      limit: 'ingress_connections_per_ip',
    }).value;
    const ports = [await tcpEndpoint(), await tcpEndpoint(), await tcpEndpoint()];
    const first = await connectFrom(ports[0]!, '127.0.0.5');
    const second = await connectFrom(ports[1]!, '127.0.0.5');
    expect(await servedOrClosed(first)).toBe('served');
    expect(await servedOrClosed(second)).toBe('served');
    // A third port, and the HTTP port: the address has spent its two already.
    expect(await servedOrClosed(await connectFrom(ports[2]!, '127.0.0.5'))).toBe('closed');
    expect(await servedOrClosed(await connectFrom(t.httpPort, '127.0.0.5'))).toBe('closed');
    expect(t.metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(
      refusedBefore + 2,
    );
    // Another address is not hurt.
    expect(await servedOrClosed(await connectFrom(ports[2]!, '127.0.0.6'))).toBe('served');
    first.destroy();
    second.destroy();
  });
});

describe('raw relays that go quiet', () => {
  let t: TestIngress;
  let silent: LocalServer;
  let echo: LocalServer;
  beforeAll(async () => {
    // Short enough to watch here; the defaults are an hour and 30 s.
    t = await startTestIngress({
      limits: { ...DEFAULT_LIMITS, relayIdleTimeoutMs: 400, relayHalfClosedTimeoutMs: 300 },
    });
    // Reads and never answers, and never ends its side: a service that holds a half-close open.
    silent = await startTcpUpstream((socket) => {
      socket.resume();
      socket.on('error', () => socket.destroy());
    });
    echo = await startEchoUpstream();
  });
  afterAll(async () => {
    await t.close();
    await silent.close();
    await echo.close();
  });

  async function endpointTo(upstream: LocalServer): Promise<number> {
    const port = await freePort();
    t.registry.addTunnel(fakeTunnel({ proto: 'tcp', port, upstreamPort: upstream.port }));
    await t.ingress.tcp.listening(port);
    return port;
  }

  it('closes a half-closed relay whose service keeps its side open, and counts it', async () => {
    const port = await endpointTo(silent);
    const client = await connectFrom(port);
    client.resume();
    client.write('request, then FIN');
    client.end();
    await once(client, 'close');
    expect(t.metrics.limitRefusals.with({ limit: 'relay_half_closed_timeout' }).value).toBe(1);
    expect(t.ingress.tcp.ports).toContain(port);
  });

  it('closes a half-closed upgraded connection (101) whose service keeps its side open', async () => {
    const before = t.metrics.limitRefusals.with({ limit: 'relay_half_closed_timeout' }).value;
    // Switches protocols, then reads and never answers or closes.
    const upgrading = await startTcpUpstream((socket) => {
      socket.on('error', () => socket.destroy());
      socket.once('data', () =>
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n',
        ),
      );
      socket.resume();
    });
    try {
      const hostname = 'upgrade.burrow.test';
      t.registry.addTunnel(fakeTunnel({ proto: 'http', hostname, upstreamPort: upgrading.port }));
      const client = await connectFrom(t.httpPort);
      client.write(
        `GET / HTTP/1.1\r\nHost: ${hostname}\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n`,
      );
      const [answer] = (await once(client, 'data')) as [Buffer];
      expect(String(answer)).toMatch(/^HTTP\/1\.1 101 /);
      client.end();
      await once(client, 'close');
      expect(t.metrics.limitRefusals.with({ limit: 'relay_half_closed_timeout' }).value).toBe(
        before + 1,
      );
    } finally {
      await upgrading.close();
    }
  });

  it('closes an idle TLS passthrough relay (the service never answers the ClientHello)', async () => {
    const before = t.metrics.limitRefusals.with({ limit: 'relay_idle_timeout' }).value;
    const servername = 'passthrough.burrow.test';
    t.registry.addTunnel(
      fakeTunnel({ proto: 'tls', hostname: servername, upstreamPort: silent.port }),
    );
    const client = tlsConnect({ port: t.httpsPort, host: '127.0.0.1', servername });
    client.on('error', () => {});
    // The handshake never finishes: the client sees it fail when the edge closes the relay.
    await new Promise((resolve) => client.once('close', resolve));
    expect(t.metrics.limitRefusals.with({ limit: 'relay_idle_timeout' }).value).toBe(before + 1);
  });

  it('closes an idle relay, both sides, after bytes went both ways', async () => {
    const port = await endpointTo(echo);
    const openBefore = echo.open;
    const before = t.metrics.limitRefusals.with({ limit: 'relay_idle_timeout' }).value;
    const client = await connectFrom(port);
    expect(await servedOrClosed(client)).toBe('served');
    await once(client, 'close');
    expect(t.metrics.limitRefusals.with({ limit: 'relay_idle_timeout' }).value).toBe(before + 1);
    // The service's side of the relay was closed too.
    while (echo.open > openBefore) await new Promise((r) => setTimeout(r, 20));
  });
});
