import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  StreamType,
  call,
  readProxyHeader,
  type BindOpts,
  type BindResp,
  type MuxStream,
} from '../../protocol/index.js';
import { edgeFixtures } from '../../../test/support/edge-fixtures.js';
import {
  connectTestAgent,
  startTestAgentEdge,
  type TestAgent,
  type TestAgentEdge,
  expectRpcError,
} from '../../../test/support/agent-edge.js';
import { readAll, until } from '../../../test/support/mux.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';

describe.each(DATABASE_KINDS)('agent binds (%s)', (kind) => {
  let edge: TestAgentEdge;
  let fx: ReturnType<typeof edgeFixtures>;
  let token: string;
  const agents: TestAgent[] = [];

  /** A connected, authenticated agent (with `acl` on a fresh token when given). */
  async function agentWith(acl?: string[]) {
    const agent = await connectTestAgent(edge);
    agents.push(agent);
    const t = acl ? await edge.token({ acl }) : token;
    const auth = await agent.auth({ AuthToken: t });
    return { agent, auth, token: t };
  }
  const bind = (agent: TestAgent, proto: string, opts: BindOpts = {}, more: object = {}) =>
    call(agent.mux, StreamType.Bind, {
      Id: '',
      Proto: proto,
      ForwardsTo: 'localhost:3000',
      Opts: opts,
      Extra: {},
      ...more,
    });

  beforeAll(async () => {
    edge = await startTestAgentEdge(kind, {
      limits: { maxProxyStreams: 2, maxQueuedProxyStreams: 0 },
    });
    fx = edgeFixtures(edge.store);
    token = await edge.token();
    await fx.reservedDomain('app.example.com');
    await fx.reservedDomain('*.sitea.example.com');
  });
  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
  });
  afterAll(async () => edge.close());

  it('binds a random name under the base domain, https and http', async () => {
    const { agent } = await agentWith();
    const https = await bind(agent, 'https');
    expect(https).toMatchObject({
      Proto: 'https',
      URL: expect.stringMatching(/^https:\/\/[a-z0-9]{10}\.burrow\.test:8443$/),
      Id: expect.stringMatching(/^tn_/),
      Extra: { Token: expect.any(String) },
      Opts: {},
    });
    const http = await bind(agent, 'http');
    expect(http.URL).toMatch(/^http:\/\/[a-z0-9]{10}\.burrow\.test:8080$/);
    expect(edge.metrics.tunnels.with({ proto: 'https' }).value).toBeGreaterThanOrEqual(1);
    const host = new URL(https.URL).hostname;
    expect(edge.registry.byHost(host)).toMatchObject({
      bindId: https.Id,
      proto: 'https',
      url: https.URL,
      forwardsTo: 'localhost:3000',
    });
  });

  it('binds a reserved name, a name under a reserved wildcard, and a subdomain of the base domain', async () => {
    const { agent } = await agentWith();
    const named = await bind(agent, 'https', { Domain: 'App.Example.com' });
    expect(named.URL).toBe('https://app.example.com:8443');
    expect(edge.registry.byHost('app.example.com')!.domainId).toMatch(/^rd_/);
    const covered = await bind(agent, 'tls', { Hostname: 'dev1.sitea.example.com' });
    expect(covered.URL).toBe('tls://dev1.sitea.example.com:8443');
    const goStyle = await bind(agent, 'https', { URL: 'https://deep.er.sitea.example.com' });
    expect(goStyle.URL).toBe('https://deep.er.sitea.example.com:8443');
    const sub = await bind(agent, 'https', { Subdomain: 'myapp' });
    expect(sub.URL).toBe('https://myapp.burrow.test:8443');
    const wildcard = await bind(agent, 'https', { Domain: '*.sitea.example.com' });
    expect(wildcard.URL).toBe('https://*.sitea.example.com:8443');
  });

  it('refuses names that are not reserved (319) or wildcards not reserved exactly (321)', async () => {
    const { agent } = await agentWith();
    const notReserved = await expectRpcError(bind(agent, 'https', { Domain: 'other.example.org' }));
    expect(notReserved.errorCode).toBe('ERR_NGROK_319');
    expect(notReserved.message).toMatch(/other\.example\.org/);
    const wild = await expectRpcError(bind(agent, 'https', { Domain: '*.x.sitea.example.com' }));
    expect(wild.errorCode).toBe('ERR_NGROK_321');
    const bad = await expectRpcError(bind(agent, 'https', { Domain: 'not_a name' }));
    expect(bad.errorCode).toBe('ERR_NGROK_801');
    const proto = await expectRpcError(bind(agent, 'ftp'));
    expect(proto.errorCode).toBe('ERR_NGROK_801');
  });

  it('applies the credential ACL to names (316), addresses (308), random addresses (356)', async () => {
    const { agent } = await agentWith(['bind:*.sitea.example.com']);
    expect((await bind(agent, 'https', { Domain: 'dev2.sitea.example.com' })).URL).toBe(
      'https://dev2.sitea.example.com:8443',
    );
    expect(
      (await expectRpcError(bind(agent, 'https', { Domain: 'app.example.com' }))).errorCode,
    ).toBe('ERR_NGROK_316');
    expect((await expectRpcError(bind(agent, 'https'))).errorCode).toBe('ERR_NGROK_316');
    const addr = await fx.reservedAddr();
    expect((await expectRpcError(bind(agent, 'tcp', { Addr: addr.addr }))).errorCode).toBe(
      'ERR_NGROK_308',
    );
    expect((await expectRpcError(bind(agent, 'tcp'))).errorCode).toBe('ERR_NGROK_356');
  });

  it('binds a reserved TCP address and a random free port; refuses unreserved addresses (319)', async () => {
    const { agent } = await agentWith();
    const addr = await fx.reservedAddr();
    const reserved = await bind(agent, 'tcp', { Addr: addr.addr });
    expect(reserved.URL).toBe(`tcp://${addr.addr}`);
    const port = Number(addr.addr.split(':')[1]);
    expect(edge.registry.byPort(port)).toMatchObject({ addrId: addr.id, proto: 'tcp' });
    const random = await bind(agent, 'tcp');
    const randomPort = Number(random.URL.split(':')[2]);
    expect(random.URL).toMatch(/^tcp:\/\/tcp\.burrow\.test:\d+$/);
    expect(randomPort).toBeGreaterThanOrEqual(20000);
    expect(randomPort).toBeLessThanOrEqual(20999);
    expect(
      await edge.repos.reservedAddrs.findByAddr(`tcp.burrow.test:${randomPort}`),
    ).toBeUndefined();
    const notReserved = await expectRpcError(bind(agent, 'tcp', { Addr: 'tcp.burrow.test:20999' }));
    expect(notReserved.errorCode).toBe('ERR_NGROK_319');
    const otherHost = await expectRpcError(
      bind(agent, 'tcp', { URL: `tcp://elsewhere.test:${port}` }),
    );
    expect(otherHost.errorCode).toBe('ERR_NGROK_319');
  });

  it('refuses a name or address already online (334), and one attached to an edge (381)', async () => {
    const first = await agentWith();
    const second = await agentWith();
    await bind(first.agent, 'https', { Domain: 'dup.sitea.example.com' });
    const dup = await expectRpcError(
      bind(second.agent, 'https', { Domain: 'dup.sitea.example.com' }),
    );
    expect(dup.errorCode).toBe('ERR_NGROK_334');
    const sameSession = await expectRpcError(
      bind(first.agent, 'tls', { Domain: 'dup.sitea.example.com' }),
    );
    expect(sameSession.errorCode).toBe('ERR_NGROK_334');
    const addr = await fx.reservedAddr();
    await bind(first.agent, 'tcp', { Addr: addr.addr });
    expect((await expectRpcError(bind(second.agent, 'tcp', { Addr: addr.addr }))).errorCode).toBe(
      'ERR_NGROK_334',
    );

    const edged = await fx.reservedDomain('edged.example.com');
    const edgeAddr = await fx.reservedAddr();
    const tls = await edge.repos.edges.create('tls', { hostports: [`${edged.domain}:8443`] });
    await edge.repos.edges.create('tcp', { hostports: [edgeAddr.addr] });
    const byName = await expectRpcError(bind(second.agent, 'https', { Domain: edged.domain }));
    expect(byName.errorCode).toBe('ERR_NGROK_381');
    expect(byName.message).toContain(tls.id);
    expect(
      (await expectRpcError(bind(second.agent, 'tcp', { Addr: edgeAddr.addr }))).errorCode,
    ).toBe('ERR_NGROK_381');
  });

  it('refuses security options it does not enforce, and accepts them unset', async () => {
    const { agent } = await agentWith();
    const unset: BindOpts = {
      BasicAuth: null,
      IPRestriction: { AllowCIDRs: [], DenyCIDRs: [] },
      TrafficPolicy: '',
      ProxyProto: 0,
      Compression: null,
      RequestHeaders: { Add: {}, Remove: [] },
      OAuth: null,
      HostHeaderRewrite: false,
    };
    expect((await bind(agent, 'https', unset)).URL).toMatch(/^https:/);
    const cases: [BindOpts, RegExp][] = [
      // Enforced as policy rules, so refused only when the value cannot be enforced.
      [{ BasicAuth: { Credentials: [{ Username: 'a', CleartextPassword: 'b' }] } }, /BasicAuth/],
      [{ IPRestriction: { AllowCIDRs: ['10.0.0.300/8'] } }, /IPRestriction/],
      [{ WebhookVerification: { Provider: 'paypal', Secret: 's' } }, /WebhookVerification/],
      [{ ProxyProto: 3 }, /ProxyProto 3.*version is 1 or 2/],
      [{ OIDC: { IssuerUrl: 'https://idp' } }, /OIDC/],
      [{ OAuth: { Provider: 'google' } }, /OAuth/],
      [{ MutualTLSCA: { MutualTLSCA: 'AAAA' } }, /MutualTLSCA/],
    ];
    for (const [opts, message] of cases) {
      const err = await expectRpcError(bind(agent, 'https', opts));
      expect(err.message).toMatch(message);
    }
    const enforced = await bind(agent, 'https', {
      IPRestriction: { AllowCIDRs: ['10.0.0.0/8'] },
      Compression: {},
    });
    expect(enforced.URL).toMatch(/^https:/);
    const tls = await expectRpcError(
      bind(agent, 'tls', { TLSTermination: { Cert: 'AA', Key: 'BB' } }),
    );
    expect(tls.message).toMatch(/TLSTermination/);
    const internal = await expectRpcError(
      bind(agent, 'https', {}, { Extra: { Bindings: ['internal'] } }),
    );
    expect(internal.message).toMatch(/must have a name ending in '\.internal'/);
    const k8s = await expectRpcError(
      bind(agent, 'https', {}, { Extra: { Bindings: ['kubernetes'] } }),
    );
    expect(k8s.message).toMatch(/Bindings/);
  });

  it('registers labeled tunnels for edges, with the label ACL (399) and at least one label (394)', async () => {
    const { agent } = await agentWith(['bind:edge=*']);
    const resp = await call(agent.mux, StreamType.StartTunnelWithLabel, {
      Labels: { edge: 'edghts_1' },
      ForwardsTo: 'localhost:80',
      Metadata: 'm',
    });
    expect(resp.Id).toMatch(/^tn_/);
    expect(edge.registry.matchingLabels({ edge: 'edghts_1' })).toMatchObject([
      { id: resp.Id, labels: { edge: 'edghts_1' }, url: undefined, metadata: 'm' },
    ]);
    const { agent: open } = await agentWith();
    const ok = await call(open.mux, StreamType.StartTunnelWithLabel, {
      Labels: { edge: 'edghts_2' },
      ForwardsTo: 'x',
    });
    expect(edge.registry.matchingLabels({ edge: 'edghts_2' })).toMatchObject([
      { id: ok.Id, labels: { edge: 'edghts_2' }, url: undefined },
    ]);
    const err = await expectRpcError(
      call(open.mux, StreamType.StartTunnelWithLabel, { Labels: {} }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_394');
  });

  it('refuses a label the ACL does not allow (399)', async () => {
    const { agent } = await agentWith(['bind:edge=*']);
    const err = await expectRpcError(
      call(agent.mux, StreamType.StartTunnelWithLabel, { Labels: { edge: 'e', app: 'x' } }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_399');
    expect(err.message).toContain('app=x');
  });

  it('answers SrvInfo and PatchTunnelState (metadata changes, bad policies refused)', async () => {
    const { agent } = await agentWith();
    expect(await call(agent.mux, StreamType.SrvInfo, {})).toMatchObject({ Region: 'local' });
    const b = await bind(agent, 'https', {}, { Id: 'patch-me' });
    await call(agent.mux, StreamType.PatchTunnelState, { TunnelId: 'patch-me', Metadata: 'v2' });
    expect(edge.registry.tunnel(b.Extra.TunnelID!)!.metadata).toBe('v2');
    const policy = await expectRpcError(
      call(agent.mux, StreamType.PatchTunnelState, { TunnelId: 'patch-me', TrafficPolicy: 'x: 1' }),
    );
    expect(policy.errorCode).toBe('ERR_NGROK_2236');
    expect(policy.message).toMatch(/TrafficPolicy/);
    expect(edge.registry.tunnel(b.Extra.TunnelID!)!.policy).toBeUndefined();
    const unknown = await expectRpcError(
      call(agent.mux, StreamType.PatchTunnelState, { TunnelId: 'nope' }),
    );
    expect(unknown.message).toMatch(/nope/);
  });

  it('unbinds (idempotently), freeing the name', async () => {
    const { agent } = await agentWith();
    const b = await bind(agent, 'https', { Domain: 'gone.sitea.example.com' });
    await call(agent.mux, StreamType.Unbind, { Id: b.Id });
    expect(edge.registry.byHost('gone.sitea.example.com')).toBeUndefined();
    await call(agent.mux, StreamType.Unbind, { Id: b.Id });
    const { agent: other } = await agentWith();
    expect((await bind(other, 'https', { Domain: 'gone.sitea.example.com' })).URL).toMatch(/gone/);
  });

  it('takes over tunnels on resumption: same URLs, the stale session evicted', async () => {
    const { agent: stale, auth } = await agentWith();
    const random = await bind(stale, 'https', {}, { Id: 'bind-a' });
    const named = await bind(
      stale,
      'https',
      { Domain: 'keep.sitea.example.com' },
      { Id: 'bind-b' },
    );
    const tcp = await bind(stale, 'tcp', {}, { Id: 'bind-c' });
    const fresh = await connectTestAgent(edge);
    agents.push(fresh);
    const resumed = await fresh.auth(
      { AuthToken: token, Cookie: auth.Extra!.Cookie },
      { ClientId: auth.ClientId },
    );
    expect(resumed.ClientId).not.toBe(auth.ClientId);
    const rebind = (old: BindResp, opts: BindOpts, proto = 'https') =>
      bind(fresh, proto, opts, { Id: old.Id, Extra: { Token: old.Extra.Token } });
    expect((await rebind(random, {})).URL).toBe(random.URL);
    expect(stale.mux.closed).toBe(false);
    expect((await rebind(named, { Domain: 'keep.sitea.example.com' })).URL).toBe(named.URL);
    expect((await rebind(tcp, {}, 'tcp')).URL).toBe(tcp.URL);
    // Evicted as soon as it holds nothing, long before the 10 s takeover grace.
    await until(() => stale.mux.closed, 2000);
    await until(() => edge.registry.session(auth.ClientId) === undefined);
    expect(edge.registry.byHost('keep.sitea.example.com')!.sessionId).toBe(resumed.ClientId);
    expect(edge.registry.byHost(new URL(random.URL).hostname)!.sessionId).toBe(resumed.ClientId);
  });

  it('does not let a session without a valid cookie take over', async () => {
    const { agent: holder, auth } = await agentWith();
    await bind(holder, 'https', { Domain: 'mine.sitea.example.com' }, { Id: 'x' });
    const thief = await connectTestAgent(edge);
    agents.push(thief);
    await thief.auth({ AuthToken: token, Cookie: 'forged.cookie' }, { ClientId: auth.ClientId });
    const err = await expectRpcError(
      bind(thief, 'https', { Domain: 'mine.sitea.example.com' }, { Id: 'x' }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_334');
    expect(holder.mux.closed).toBe(false);
  });

  it('proxies: connect() sends the ProxyHeader and carries bytes both ways; fails fast when gone', async () => {
    const { agent } = await agentWith();
    const b = await bind(agent, 'https', {}, { Id: 'proxy-me' });
    agent.typed.on('stream', (stream: MuxStream, type: number) => {
      expect(type).toBe(StreamType.Proxy);
      void readProxyHeader(stream).then((header) => {
        stream.write(JSON.stringify(header) + '\n');
        stream.pipe(stream);
      });
    });
    const tunnel = edge.registry.byHost(new URL(b.URL).hostname)!;
    const conn = await tunnel.connect({
      clientAddr: '203.0.113.7:4567',
      proto: 'https',
      edgeType: '',
      passthroughTls: false,
    });
    conn.end('GET / HTTP/1.1\r\n\r\n');
    const [header, rest] = String(await readAll(conn)).split('\n', 2);
    expect(JSON.parse(header!)).toEqual({
      Id: 'proxy-me',
      ClientAddr: '203.0.113.7:4567',
      Proto: 'https',
      EdgeType: '',
      PassthroughTLS: false,
    });
    expect(rest).toBe('GET / HTTP/1.1\r');

    const held = await Promise.all(
      [1, 2].map(() =>
        tunnel.connect({ clientAddr: 'a:1', proto: 'https', edgeType: '', passthroughTls: false }),
      ),
    );
    await expect(
      tunnel.connect({ clientAddr: 'a:1', proto: 'https', edgeType: '', passthroughTls: false }),
    ).rejects.toThrow(/connections open/);
    for (const h of held) h.destroy();
    agent.close();
    await until(() => edge.registry.tunnel(tunnel.id) === undefined);
    await expect(
      tunnel.connect({ clientAddr: 'a:1', proto: 'https', edgeType: '', passthroughTls: false }),
    ).rejects.toThrow(/offline|gone/);
  });
});
