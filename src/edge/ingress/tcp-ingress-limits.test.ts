import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../core/limits.js';
import {
  fakeTunnel,
  freePort,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { startEchoUpstream } from '../../../test/support/tcp-upstreams.js';

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

  it('closes a third connection from one address while two stay served', async () => {
    const port = await freePort();
    t.registry.addTunnel(fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port }));
    await t.ingress.tcp.listening(port);
    const open: Socket[] = [];
    for (let i = 0; i < 2; i++) {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      open.push(socket);
    }
    const third = connect(port, '127.0.0.1');
    third.on('error', () => {});
    third.resume();
    await once(third, 'close');
    open[0]!.write('still served');
    const [echoed] = (await once(open[0]!, 'data')) as [Buffer];
    expect(String(echoed)).toBe('still served');
    expect(t.metrics.limitRefusals.with({ limit: 'ingress_connections_per_ip' }).value).toBe(1);
    for (const socket of open) socket.destroy();
  });
});
