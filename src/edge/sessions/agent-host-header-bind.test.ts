import { describe, expect, it } from 'vitest';
import { expectRpcError } from '../../../test/support/agent-edge.js';
import { bindOptsEdge, clusterStandIn } from '../../../test/support/bind-opts-edge.js';

/**
 * Opts.HostHeaderRewrite is kept on the tunnel (and its cluster row: the node that receives a
 * request writes its head); the ingress rewrites the Host (http-host-header.test.ts).
 */
describe('binds with HostHeaderRewrite', () => {
  const t = bindOptsEdge('http://localhost:3000');

  it("is on the tunnel and in the cluster's tunnel row, so stand-ins rewrite too", async () => {
    const b = await t.bind(await t.agent(), 'https', { HostHeaderRewrite: true });
    const tunnel = t.edge.registry.byHost(new URL(b.URL).hostname)!;
    expect(tunnel.hostHeaderRewrite).toBe(true);
    expect(tunnel.forwardsTo).toBe('http://localhost:3000');
    const { row, standIn } = clusterStandIn(tunnel);
    expect(row.data.hostHeaderRewrite).toBe(true);
    expect(standIn.hostHeaderRewrite).toBe(true);
    expect(standIn.forwardsTo).toBe('http://localhost:3000');
  });

  it('off (false, or absent) leaves it unset, in the row too', async () => {
    const b = await t.bind(await t.agent(), 'http', { HostHeaderRewrite: false });
    const tunnel = t.edge.registry.byHost(new URL(b.URL).hostname)!;
    expect(tunnel.hostHeaderRewrite).toBeUndefined();
    expect('hostHeaderRewrite' in clusterStandIn(tunnel).row.data).toBe(false);
  });

  it('is refused on tcp and tls endpoints, which carry no HTTP requests', async () => {
    const a = await t.agent();
    for (const proto of ['tcp', 'tls']) {
      const err = await expectRpcError(t.bind(a, proto, { HostHeaderRewrite: true }));
      expect(err.message).toMatch(/Opts\.HostHeaderRewrite.*http and https endpoints/);
    }
  });
});
