import { once } from 'node:events';
import net from 'node:net';
import type * as tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../core/logger.js';
import { RefusalLog } from '../listeners/connection-gate.js';
import { EdgeMetrics } from '../metrics/metrics.js';
import { nodeCredentials, type CaSettings } from './cluster-ca.js';
import { NODE_LINK_CAPS, nodeLinkServer } from './node-link-tls.js';
import { NodeLinks } from './node-links.js';

class MemorySettings implements CaSettings {
  private readonly values = new Map<string, string>();
  async getOrCreate(key: string, make: () => string): Promise<string> {
    if (!this.values.has(key)) this.values.set(key, make());
    return this.values.get(key)!;
  }
}

describe('the node-link listener', () => {
  let server: tls.Server;
  let port: number;
  const metrics = new EdgeMetrics();
  beforeAll(async () => {
    const credentials = await nodeCredentials(new MemorySettings(), 'edge-a');
    server = nodeLinkServer(credentials, 60_000, new RefusalLog(undefined, metrics));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => server.close());

  it('holds at most its per-address cap of silent connections from one address', async () => {
    const sockets = Array.from({ length: NODE_LINK_CAPS.maxPerIp + 3 }, () => {
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.7' });
      socket.on('error', () => undefined);
      return socket;
    });
    let closed = 0;
    await new Promise<void>((resolve) => {
      for (const socket of sockets) {
        socket.once('close', () => {
          if (++closed === 3) resolve();
        });
      }
    });
    expect(metrics.limitRefusals.with({ limit: 'node_link_connections_per_ip' }).value).toBe(3);
    for (const socket of sockets) socket.destroy();
  });
});

describe('NodeLinks (as joinCluster starts them)', () => {
  it('counts its listener’s refusals in the metrics it is given', async () => {
    const metrics = new EdgeMetrics();
    const links = await NodeLinks.start({
      nodeId: 'edge-b',
      credentials: await nodeCredentials(new MemorySettings(), 'edge-b'),
      listen: '127.0.0.1:0',
      logger: createLogger('silent'),
      refusals: new RefusalLog(undefined, metrics),
      open: () => Promise.reject(new Error('no tunnels here')),
    });
    const port = Number(links.address.slice(links.address.lastIndexOf(':') + 1));
    const sockets = Array.from({ length: NODE_LINK_CAPS.maxPerIp + 2 }, () => {
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.8' });
      socket.on('error', () => undefined);
      return socket;
    });
    try {
      await expect
        .poll(() => metrics.limitRefusals.with({ limit: 'node_link_connections_per_ip' }).value)
        .toBe(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      await links.close();
    }
  });
});
