import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StreamType, call, type BindOpts } from '../../protocol/index.js';
import {
  connectTestAgent,
  expectRpcError,
  startTestAgentEdge,
  type TestAgent,
  type TestAgentEdge,
} from '../../../test/support/agent-edge.js';
import { RemoteTunnel, tunnelRow } from '../cluster/online-rows.js';

/**
 * Opts.HostHeaderRewrite is kept on the tunnel (and its cluster row: the node that receives a
 * request writes its head); the ingress rewrites the Host (http-host-header.test.ts).
 */
describe('binds with HostHeaderRewrite', () => {
  let edge: TestAgentEdge;
  let token: string;
  const agents: TestAgent[] = [];

  beforeAll(async () => {
    edge = await startTestAgentEdge('sqlite');
    token = await edge.token();
  });
  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
  });
  afterAll(async () => edge.close());

  async function agent(): Promise<TestAgent> {
    const a = await connectTestAgent(edge);
    agents.push(a);
    await a.auth({ AuthToken: token });
    return a;
  }
  const bind = (a: TestAgent, proto: string, opts: BindOpts) =>
    call(a.mux, StreamType.Bind, {
      Id: '',
      Proto: proto,
      ForwardsTo: 'http://localhost:3000',
      Opts: opts,
      Extra: {},
    });

  it("is on the tunnel and in the cluster's tunnel row, so stand-ins rewrite too", async () => {
    const b = await bind(await agent(), 'https', { HostHeaderRewrite: true });
    const tunnel = edge.registry.byHost(new URL(b.URL).hostname)!;
    expect(tunnel.hostHeaderRewrite).toBe(true);
    expect(tunnel.forwardsTo).toBe('http://localhost:3000');
    const row = tunnelRow(tunnel, 'node-a', 'cr_x', undefined);
    expect(row.data.hostHeaderRewrite).toBe(true);
    const standIn = new RemoteTunnel(row, () => Promise.reject(new Error('not here')));
    expect(standIn.hostHeaderRewrite).toBe(true);
    expect(standIn.forwardsTo).toBe('http://localhost:3000');
  });

  it('off (false, or absent) leaves it unset, in the row too', async () => {
    const b = await bind(await agent(), 'http', { HostHeaderRewrite: false });
    const tunnel = edge.registry.byHost(new URL(b.URL).hostname)!;
    expect(tunnel.hostHeaderRewrite).toBeUndefined();
    expect('hostHeaderRewrite' in rowData(tunnel)).toBe(false);
  });

  it('is refused on tcp and tls endpoints, which carry no HTTP requests', async () => {
    const a = await agent();
    for (const proto of ['tcp', 'tls']) {
      const err = await expectRpcError(bind(a, proto, { HostHeaderRewrite: true }));
      expect(err.message).toMatch(/Opts\.HostHeaderRewrite.*http and https endpoints/);
    }
  });

  function rowData(tunnel: Parameters<typeof tunnelRow>[0]): Record<string, unknown> {
    return tunnelRow(tunnel, 'node-a', 'cr_x', undefined).data;
  }
});
