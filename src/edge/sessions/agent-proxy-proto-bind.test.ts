import { describe, expect, it } from 'vitest';
import { StreamType, readProxyHeader, type MuxStream } from '../../protocol/index.js';
import { parseProxyProtocol, PROXY_V2_SIGNATURE } from '../../protocol/proxy-protocol.js';
import type { TestAgent } from '../../../test/support/agent-edge.js';
import { bindOptsEdge, clusterStandIn } from '../../../test/support/bind-opts-edge.js';
import { readAll } from '../../../test/support/mux.js';

/**
 * Opts.ProxyProto: the edge writes a PROXY protocol header first on every stream of the tunnel.
 * (Not agent-proxy-protocol.test.ts: that is the agent listener reading headers from a balancer.)
 */
describe('binds with ProxyProto', () => {
  const t = bindOptsEdge('localhost:3000');

  /** An agent whose proxy streams answer with all they received, the ProxyHeader aside. */
  async function echoAgent(): Promise<TestAgent> {
    const agent = await t.agent();
    agent.typed.on('stream', (stream: MuxStream, type: number) => {
      if (type !== StreamType.Proxy) return;
      void readProxyHeader(stream).then(() => stream.pipe(stream));
    });
    return agent;
  }

  it('ProxyProto 2: the stream starts with a v2 header naming the client, then the bytes', async () => {
    const agent = await echoAgent();
    const b = await t.bind(agent, 'tcp', { ProxyProto: 2 });
    const tunnel = t.edge.registry.byPort(Number(new URL(b.URL).port))!;
    expect(tunnel.proxyProto).toBe(2);
    const conn = await tunnel.connect({
      clientAddr: '203.0.113.7:4567',
      serverAddr: '198.51.100.1:20001',
      proto: 'tcp',
      edgeType: '',
      passthroughTls: false,
    });
    conn.end('hello');
    const got = await readAll(conn);
    expect(got.subarray(0, 12)).toEqual(PROXY_V2_SIGNATURE);
    const header = parseProxyProtocol(got)!;
    expect(header).toEqual({
      version: 2,
      source: { address: '203.0.113.7', port: 4567, family: 'IPv4' },
      length: 28,
    });
    // The destination: the address the client connected to.
    expect([...got.subarray(20, 24)]).toEqual([198, 51, 100, 1]);
    expect(got.readUInt16BE(26)).toBe(20001);
    expect(got.subarray(header.length).toString()).toBe('hello');
  });

  it("keeps ProxyProto in the cluster's tunnel row: stand-ins know it (their HTTP stream pools)", async () => {
    const agent = await echoAgent();
    const b = await t.bind(agent, 'tcp', { ProxyProto: 1 });
    const tunnel = t.edge.registry.byPort(Number(new URL(b.URL).port))!;
    const { row, standIn } = clusterStandIn(tunnel);
    expect(row.data.proxyProto).toBe(1);
    expect(standIn.proxyProto).toBe(1);
  });

  it("ProxyProto '1' on https: a v1 line; without serverAddr the destination is unspecified", async () => {
    const agent = await echoAgent();
    const b = await t.bind(agent, 'https', { ProxyProto: '1' as unknown as number });
    const tunnel = t.edge.registry.byHost(new URL(b.URL).hostname)!;
    expect(tunnel.proxyProto).toBe(1);
    const conn = await tunnel.connect({
      clientAddr: '[2001:db8::7]:4000',
      proto: 'https',
      edgeType: '',
      passthroughTls: false,
    });
    conn.end('GET / HTTP/1.1\r\n\r\n');
    expect(String(await readAll(conn))).toBe(
      'PROXY TCP6 2001:db8::7 :: 4000 0\r\nGET / HTTP/1.1\r\n\r\n',
    );
  });

  it('without ProxyProto (0): no header', async () => {
    const agent = await echoAgent();
    const b = await t.bind(agent, 'tcp', { ProxyProto: 0 });
    const tunnel = t.edge.registry.byPort(Number(new URL(b.URL).port))!;
    expect(tunnel.proxyProto).toBeUndefined();
    const conn = await tunnel.connect({
      clientAddr: '203.0.113.7:4567',
      proto: 'tcp',
      edgeType: '',
      passthroughTls: false,
    });
    conn.end('plain');
    expect(String(await readAll(conn))).toBe('plain');
  });
});
