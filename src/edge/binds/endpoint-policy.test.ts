import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { compilePolicy, estimatedPolicyBytes, PolicyEventLog } from '../../policy/index.js';
import { StreamType, call, type BindOpts } from '../../protocol/index.js';
import {
  connectTestAgent,
  startTestAgentEdge,
  type TestAgent,
  type TestAgentEdge,
  expectRpcError,
} from '../../../test/support/agent-edge.js';
import { edgeFixtures } from '../../../test/support/edge-fixtures.js';
import { fakeTunnel } from '../../../test/support/ingress.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { legacyPolicyText } from './bind-traffic-policy.js';
import { EndpointPolicies, endpointInputOf, type LivePolicyBudget } from './endpoint-policy.js';
import { TunnelRegistry } from '../registry/tunnel-registry.js';

const DENY_BOTS = `
on_http_request:
  - name: no bots
    expressions: ["req.headers['user-agent'][0].contains('bot')"]
    actions: [{type: deny}]
`;

describe.each(DATABASE_KINDS)('binds with traffic policies (%s)', (kind) => {
  let edge: TestAgentEdge;
  let agent: TestAgent;
  const agents: TestAgent[] = [];

  const bind = (proto: string, opts: BindOpts, id = '') =>
    call(agent.mux, StreamType.Bind, {
      Id: id,
      Proto: proto,
      ForwardsTo: 'x',
      Opts: opts,
      Extra: {},
    });

  beforeAll(async () => {
    edge = await startTestAgentEdge(kind);
  });
  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
  });
  afterAll(async () => edge.close());
  const connectAgent = async () => {
    agent = await connectTestAgent(edge);
    agents.push(agent);
    await agent.auth({ AuthToken: await edge.token() });
  };

  it('accepts TrafficPolicy text and keeps the compiled runner with the tunnel', async () => {
    await connectAgent();
    const resp = await bind('https', { TrafficPolicy: DENY_BOTS });
    const tunnel = edge.registry.tunnel(resp.Extra.TunnelID!)!;
    expect(tunnel.trafficPolicy).toBe(DENY_BOTS);
    expect(tunnel.policy).toMatchObject({
      ownerId: tunnel.id,
      endpoint: endpointInputOf(tunnel),
    });
    expect(tunnel.policy!.endpoint).toMatchObject({ protocol: 'https', port: 8443 });
    expect(tunnel.policy!.runner.policy.has('on_http_request')).toBe(true);
    expect((await bind('https', { TrafficPolicy: '' })).Error).toBe('');
  });

  it('accepts the older structured Policy (Go field names, base64 configs) on tcp and tls', async () => {
    await connectAgent();
    const config = Buffer.from(JSON.stringify({ metadata: { who: 'x' } })).toString('base64');
    const legacy = {
      Inbound: [
        { Name: 'log', Expressions: null, Actions: [{ Type: 'log', Config: config }] },
        {
          Name: 'block',
          Expressions: ["conn.ClientIP == '192.0.2.0'"],
          Actions: [{ Type: 'deny' }],
        },
      ],
      Outbound: null,
    };
    for (const proto of ['tcp', 'tls']) {
      const resp = await bind(proto, { Policy: legacy });
      const tunnel = edge.registry.tunnel(resp.Extra.TunnelID!)!;
      expect(JSON.parse(tunnel.trafficPolicy!)).toEqual({
        inbound: [
          { name: 'log', actions: [{ type: 'log', config: { metadata: { who: 'x' } } }] },
          {
            name: 'block',
            expressions: ["conn.ClientIP == '192.0.2.0'"],
            actions: [{ type: 'deny' }],
          },
        ],
      });
      expect(tunnel.policy!.runner.policy.has('on_tcp_connect')).toBe(true);
    }
  });

  it('refuses a policy that cannot run with its code and message, creating nothing', async () => {
    await connectAgent();
    const before = edge.registry.listTunnels().length;
    const cases: [string, BindOpts, string, RegExp][] = [
      [
        'https',
        { TrafficPolicy: 'on_http_request: [{actions: [{type: deny}]' },
        'ERR_NGROK_2236',
        /TrafficPolicy/,
      ],
      [
        'https',
        {
          TrafficPolicy: `on_http_request: [{expressions: ["req.nope == 1"], actions: [{type: deny}]}]`,
        },
        'ERR_NGROK_2200',
        /on_http_request\[0\]|rule 0/,
      ],
      [
        'http',
        { TrafficPolicy: 'on_http_request: [{actions: [{type: teleport}]}]' },
        'ERR_NGROK_2201',
        /teleport/,
      ],
      [
        'tcp',
        { TrafficPolicy: 'on_http_request: [{actions: [{type: deny}]}]' },
        'ERR_NGROK_2230',
        /tcp/,
      ],
      [
        'tls',
        { Policy: { Inbound: [{ Actions: [{ Type: 'add-headers' }] }] } },
        'ERR_NGROK_2205',
        /Policy/,
      ],
      [
        'tcp',
        {
          TrafficPolicy:
            'on_tcp_connect: [{actions: [{type: restrict-ips, config: {ip_policies: [ipp_nope]}}]}]',
        },
        'ERR_NGROK_2204',
        /ipp_nope/,
      ],
      [
        'https',
        { TrafficPolicy: DENY_BOTS, Policy: { Inbound: [{ Actions: [{ Type: 'deny' }] }] } },
        'ERR_NGROK_801',
        /both/,
      ],
    ];
    for (const [proto, opts, code, message] of cases) {
      const err = await expectRpcError(bind(proto, opts));
      expect([proto, err.errorCode]).toEqual([proto, code]);
      expect(err.message).toMatch(message);
    }
    expect(edge.registry.listTunnels()).toHaveLength(before);
    const ipp = await edgeFixtures(edge.store).ipPolicy();
    const ok = await bind('tcp', {
      TrafficPolicy: `on_tcp_connect: [{actions: [{type: restrict-ips, config: {ip_policies: [${ipp}]}}]}]`,
    });
    expect(ok.Error).toBe('');
  });

  it('changes a live policy with PatchTunnelState, keeping its owner; labeled tunnels take none', async () => {
    await connectAgent();
    const resp = await bind('https', { TrafficPolicy: DENY_BOTS }, 'patched');
    const tunnel = edge.registry.tunnel(resp.Extra.TunnelID!)!;
    const before = tunnel.policy!;
    const next =
      'on_http_response: [{actions: [{type: add-headers, config: {headers: {x-v: "2"}}}]}]';
    await call(agent.mux, StreamType.PatchTunnelState, {
      TunnelId: 'patched',
      TrafficPolicy: next,
    });
    expect(tunnel.trafficPolicy).toBe(next);
    expect(tunnel.policy!.runner).not.toBe(before.runner);
    expect(tunnel.policy!.ownerId).toBe(before.ownerId);
    expect(tunnel.policy!.runner.policy.has('on_http_response')).toBe(true);
    await call(agent.mux, StreamType.PatchTunnelState, { TunnelId: 'patched', TrafficPolicy: '' });
    expect(tunnel.trafficPolicy).toBe(next);

    const labeled = await call(agent.mux, StreamType.StartTunnelWithLabel, {
      Labels: { edge: 'e' },
    });
    expect(edge.registry.tunnel(labeled.Id)!.policy).toBeUndefined();
    const err = await expectRpcError(
      call(agent.mux, StreamType.PatchTunnelState, {
        TunnelId: labeled.Id,
        TrafficPolicy: DENY_BOTS,
      }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_801');
  });

  it('hands the runner (rate-limit state, events) to the same bind’s next tunnel', async () => {
    await connectAgent();
    const first = await bind('https', { TrafficPolicy: DENY_BOTS }, 'again');
    const runner = edge.registry.tunnel(first.Extra.TunnelID!)!.policy!.runner;
    await call(agent.mux, StreamType.Unbind, { Id: 'again' });
    const second = await bind('https', { TrafficPolicy: DENY_BOTS }, 'again');
    const tunnel = edge.registry.tunnel(second.Extra.TunnelID!)!;
    expect(tunnel.id).not.toBe(first.Extra.TunnelID);
    expect(tunnel.policy!.runner).toBe(runner);
    expect(tunnel.policy!.ownerId).toBe(first.Extra.TunnelID);
  });
});

describe('EndpointPolicies', () => {
  const POLICY = 'on_tcp_connect: [{actions: [{type: log}]}]';
  const compiled = (text: string) => ({ text, policy: compilePolicy(text, { protocol: 'tcp' }) });

  function setup(
    retainMs = 60_000,
    bounds: {
      maxStates?: number;
      maxBytes?: number;
      liveBudget?: LivePolicyBudget;
    } = {},
  ) {
    const registry = new TunnelRegistry();
    const events = new PolicyEventLog();
    const { liveBudget, ...retention } = bounds;
    const policies = new EndpointPolicies({
      registry,
      events,
      retention: { retainMs, ...retention },
      liveBudget,
    });
    let ports = 0;
    const online = (
      bindId: string,
      credentialId: string,
      text: string | undefined,
      sessionId = 'ts_1',
    ) => {
      const tunnel = { ...fakeTunnel({ proto: 'tcp', port: 20001 + ports++ }), bindId, sessionId };
      registry.addTunnel(tunnel);
      policies.attach(tunnel, text === undefined ? undefined : compiled(text), credentialId);
      return tunnel;
    };
    const record = (ownerId: string) =>
      events.record({
        timestamp: '',
        owner_id: ownerId,
        phase: 'on_tcp_connect',
        rule: { index: 0, name: null },
        action: null,
        outcome: 'log',
        message: 'm',
        client_ip: '',
        metadata: null,
      });
    return { registry, events, policies, online, record };
  }

  it('keeps the owner across tunnels of one bind: same runner for the same text, a fresh one otherwise', () => {
    const { registry, policies, online } = setup();
    const a = online('b1', 'cr_1', POLICY);
    registry.removeTunnel(a.id);
    const b = online('b1', 'cr_1', POLICY);
    expect(b.policy!.runner).toBe(a.policy!.runner);
    registry.removeTunnel(b.id);
    const c = online('b1', 'cr_1', `${POLICY}\n`);
    expect(c.policy!.runner).not.toBe(a.policy!.runner);
    expect(c.policy!.ownerId).toBe(a.id);
    registry.removeTunnel(c.id);
    const other = online('b1', 'cr_2', POLICY);
    expect(other.policy!.ownerId).toBe(other.id);
    policies.close();
  });

  it('forgets the events of a bind gone for longer than retainMs, or re-bound without a policy', async () => {
    const { registry, events, policies, online, record } = setup(20);
    const a = online('b1', 'cr_1', POLICY);
    record(a.id);
    registry.removeTunnel(a.id);
    expect(events.eventsFor(a.id)).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(events.eventsFor(a.id)).toHaveLength(0);

    const b = online('b2', 'cr_1', POLICY);
    record(b.id);
    registry.removeTunnel(b.id);
    const bare = online('b2', 'cr_1', undefined);
    expect(bare.policy).toBeUndefined();
    expect(events.eventsFor(b.id)).toHaveLength(0);
    policies.close();
  });

  it('keeps gone binds’ states up to a count, forgetting the least recently gone first', () => {
    const { registry, events, policies, online, record } = setup(60_000, { maxStates: 3 });
    const gone = Array.from({ length: 5 }, (_, i) => {
      const tunnel = online(`b${i}`, 'cr_1', POLICY);
      record(tunnel.id);
      registry.removeTunnel(tunnel.id);
      return tunnel;
    });
    expect(policies.counts()).toMatchObject({ live: 0, retained: 3 });
    expect(gone.map((t) => events.eventsFor(t.id).length)).toEqual([0, 0, 1, 1, 1]);
    // The kept ones are still handed over to their bind's next tunnel.
    expect(online('b4', 'cr_1', POLICY).policy!.runner).toBe(gone[4]!.policy!.runner);
    expect(policies.counts()).toMatchObject({ live: 1, retained: 2 });
    policies.close();
  });

  it('keeps gone binds’ states up to their estimated bytes, a shared policy counted once', () => {
    const big = (tag: string) => `${POLICY}\n# ${tag}${'x'.repeat(30_000)}`;
    const policyBytes = estimatedPolicyBytes(big('a').length);
    const { registry, events, policies, online, record } = setup(60_000, {
      maxBytes: 2.5 * policyBytes,
    });
    for (let i = 0; i < 4; i++) registry.removeTunnel(online(`b${i}`, 'cr_1', big(`p${i}`)).id);
    expect(policies.counts().retained).toBe(2);
    // Many binds of one policy weigh that policy once, and a little each.
    for (let i = 0; i < 20; i++) registry.removeTunnel(online(`s${i}`, 'cr_1', big('shared')).id);
    const { retained, retainedBytes } = policies.counts();
    expect(retained).toBe(21);
    expect(retainedBytes).toBeLessThan(2.5 * policyBytes);
    // One larger than all the room there is is forgotten at once.
    const tunnel = online('h', 'cr_1', `${POLICY}\n# ${'x'.repeat(100_000)}`);
    record(tunnel.id);
    registry.removeTunnel(tunnel.id);
    expect(events.eventsFor(tunnel.id)).toHaveLength(0);
    policies.close();
    expect(policies.counts()).toMatchObject({ retained: 0, retainedBytes: 0 });
  });

  it('holds the policies of live tunnels to their estimated bytes per session, credential, process', () => {
    const text = (tag: string) => `${POLICY}\n# ${tag}${'x'.repeat(1000)}`;
    const bytes = estimatedPolicyBytes(text('a').length);
    const { registry, policies, online } = setup(60_000, {
      liveBudget: { perSession: 2.5 * bytes, perCredential: 3.5 * bytes, perProcess: 4.5 * bytes },
    });
    const room = (session: string, credential: string, tag: string) => () =>
      policies.checkRoom(session, credential, compiled(text(tag)));
    const a = online('a', 'cr_1', text('a'), 'ts_1');
    online('b', 'cr_1', text('b'), 'ts_1');
    expect(room('ts_1', 'cr_1', 'c')).toThrow(
      expect.objectContaining({ code: 'ERR_BURROW_AGENT_POLICY_BYTES', level: 'session' }),
    );
    // A policy a holder already runs costs it nothing more.
    expect(room('ts_1', 'cr_1', 'a')).not.toThrow();
    online('c', 'cr_1', text('c'), 'ts_2');
    expect(room('ts_2', 'cr_1', 'd')).toThrow(expect.objectContaining({ level: 'credential' }));
    online('d', 'cr_2', text('d'), 'ts_3');
    expect(room('ts_4', 'cr_3', 'e')).toThrow(expect.objectContaining({ level: 'process' }));
    expect(room('ts_4', 'cr_3', 'a')).not.toThrow();
    expect(policies.counts().liveBytes).toBe(4 * bytes);
    registry.removeTunnel(a.id);
    expect(room('ts_1', 'cr_1', 'c')).not.toThrow();
    for (const t of registry.listTunnels()) registry.removeTunnel(t.id);
    expect(policies.counts()).toMatchObject({ live: 0, liveBytes: 0 });
    policies.close();
  });

  it('turns a legacy object into policy text', () => {
    expect(
      legacyPolicyText({ Inbound: [{ Name: 'r', Actions: [{ Type: 'deny', Config: '{}' }] }] }),
    ).toBe('{"inbound":[{"name":"r","actions":[{"type":"deny","config":{}}]}]}');
  });
});
