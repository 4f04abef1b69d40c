import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  MuxError,
  StreamType,
  call,
  openTypedStream,
  readJsonObject,
  type MuxStream,
} from '../../protocol/index.js';
import { estimatedPolicyBytes } from '../../policy/index.js';
import {
  expectRpcError,
  useTestAgentEdge,
  type TestAgent,
} from '../../../test/support/agent-edge.js';

/** The per-session agent limits (docs/security.md): each refused with the protocol's answer. */
describe('agent session limits', () => {
  const fx = useTestAgentEdge('sqlite', {
    limits: {
      maxTunnelsPerSession: 2,
      maxStreamsPerSession: 8,
      maxFrameBytes: 16 * 1024,
      maxRpcBytes: 4096,
    },
  });
  const refusals = (limit: string): number => fx.edge.metrics.limitRefusals.with({ limit }).value;
  const authed = () => fx.authed();
  const bind = (agent: TestAgent, metadata = '') =>
    call(agent.mux, StreamType.Bind, {
      Id: '',
      Proto: 'tcp',
      ForwardsTo: 'localhost:3000',
      Opts: {},
      Extra: { Metadata: metadata },
    });

  it('refuses a bind beyond the tunnels of a session with ERR_NGROK_324; another session binds', async () => {
    const agent = await authed();
    await bind(agent);
    await bind(agent);
    const err = await expectRpcError(bind(agent));
    expect(err.errorCode).toBe('ERR_NGROK_324');
    expect(refusals('agent_tunnels_per_session')).toBe(1);
    const other = await authed();
    expect((await bind(other)).URL).toMatch(/^tcp:\/\//);
  });

  it('refuses an RPC request over the message size; the session goes on', async () => {
    const agent = await authed();
    const err = await expectRpcError(bind(agent, 'x'.repeat(5000)));
    expect(err.message).toMatch(/longer than 4096 bytes/);
    expect(refusals('agent_rpc_bytes')).toBe(1);
    expect((await bind(agent, 'small')).URL).toMatch(/^tcp:\/\//);
  });

  it('resets streams beyond the open streams of a session with StreamRefused', async () => {
    const agent = await authed();
    const before = refusals('agent_streams_per_session');
    // One byte of a stream type: the edge holds each stream open, waiting for the rest.
    const streams = Array.from({ length: 12 }, () => {
      const s = agent.mux.openStream();
      s.write(Buffer.from([0]));
      return s;
    });
    const results = await Promise.all(
      streams.map(
        (s) =>
          new Promise<number | undefined>((resolve) => {
            s.once('error', (e: unknown) => resolve(e instanceof MuxError ? e.wireCode : -1));
            setTimeout(() => resolve(undefined), 500).unref();
          }),
      ),
    );
    // The session's heartbeat-free agent holds none before these; the Auth stream may linger.
    const refused = results.filter((c) => c === ErrorCode.StreamRefused).length;
    expect(refused).toBeGreaterThanOrEqual(4);
    expect(refused).toBeLessThanOrEqual(5);
    expect(refusals('agent_streams_per_session') - before).toBe(refused);
    for (const s of streams) s.destroy();
    expect(agent.mux.closed).toBe(false);
  });

  it('closes a session that sends a DATA frame over the frame size with GOAWAY FrameSize', async () => {
    const agent = await authed();
    const bystander = await authed();
    const stream = agent.mux.openStream();
    stream.on('error', () => undefined);
    stream.write(Buffer.alloc(20 * 1024));
    const reason = await agent.mux.wait();
    expect(reason).toBeInstanceOf(MuxError);
    expect((reason as MuxError).wireCode).toBe(ErrorCode.FrameSize);
    expect((reason as MuxError).code).toBe('ERR_BURROW_MUX_FRAME_SIZE');
    expect(refusals('agent_frame_bytes')).toBe(1);
    expect((await bind(bystander)).URL).toMatch(/^tcp:\/\//);
  });
});

/**
 * The budget of bytes agent requests in progress hold (docs/security.md, "Budgets"): each request
 * is within the request size, and their sum within the session's, credential's and process's.
 */
describe('agent request budgets', () => {
  const fx = useTestAgentEdge('sqlite', {
    limits: {
      maxRpcBytes: 4096,
      rpcBudget: { perSession: 16 * 1024, perCredential: 24 * 1024, perProcess: 32 * 1024 },
    },
  });
  const refusals = (limit: string): number => fx.edge.metrics.limitRefusals.with({ limit }).value;
  const pending = (): number => fx.edge.metrics.rpcPendingBytes.with().value;
  /** A SrvInfo request left unfinished: 3,008 bytes of one JSON string, no closing quote. */
  const unfinished = (agent: TestAgent): MuxStream => {
    const stream = openTypedStream(
      agent.mux,
      StreamType.SrvInfo,
      Buffer.from(`{"Pad":"${'x'.repeat(3000)}`),
    );
    stream.on('error', () => undefined);
    return stream;
  };
  const reply = async (stream: MuxStream) =>
    (await readJsonObject(stream, { timeoutMs: 5000 })) as { Error?: string; Region?: string };
  const finish = async (streams: MuxStream[]) => {
    for (const s of streams) s.write('"}');
    return Promise.all(streams.map(reply));
  };
  const authedWith = async (token: string): Promise<TestAgent> => {
    const agent = await fx.connect();
    await agent.auth({ AuthToken: token });
    return agent;
  };

  it('refuses the newest request past a session’s budget; admitted ones finish unhurt', async () => {
    const agent = await fx.authed();
    const admitted = Array.from({ length: 5 }, () => unfinished(agent));
    const refused = await reply(unfinished(agent));
    expect(refused.Error).toMatch(/ERR_BURROW_AGENT_RPC_BYTES/);
    expect(refused.Error).toMatch(/per agent_rpc_bytes_per_session/);
    expect(refusals('agent_rpc_bytes_per_session')).toBe(1);
    expect(pending()).toBe(5 * 3008);
    for (const answer of await finish(admitted))
      expect(answer).toMatchObject({ Region: 'local', Error: '' });
    expect(pending()).toBe(0);
    expect(agent.mux.closed).toBe(false);
  });

  it('holds a credential’s sessions, and all sessions, to their budgets; the bytes come back', async () => {
    const first = await fx.authed();
    const second = await fx.authed();
    const held = Array.from({ length: 5 }, () => unfinished(first));
    // Sessions are read concurrently: each step waits until the edge holds the bytes before.
    await expect.poll(pending).toBe(5 * 3008);
    held.push(unfinished(second), unfinished(second), unfinished(second));
    await expect.poll(pending).toBe(8 * 3008);
    const byCredential = await reply(unfinished(second));
    expect(byCredential.Error).toMatch(/per agent_rpc_bytes_per_credential/);
    expect(refusals('agent_rpc_bytes_per_credential')).toBe(1);

    const other = await authedWith(await fx.edge.token());
    held.push(unfinished(other), unfinished(other));
    await expect.poll(pending).toBe(10 * 3008);
    const byProcess = await reply(unfinished(other));
    expect(byProcess.Error).toMatch(/per agent_rpc_bytes_per_process/);
    expect(refusals('agent_rpc_bytes_per_process')).toBe(1);
    expect(pending()).toBe(10 * 3008);

    for (const answer of await finish(held)) expect(answer.Error).toBe('');
    expect(pending()).toBe(0);
  });

  it('gives back what an unfinished request held when its session ends', async () => {
    const agent = await fx.authed();
    unfinished(agent);
    unfinished(agent);
    await expect.poll(pending).toBe(2 * 3008);
    agent.close();
    await expect.poll(pending).toBe(0);
  });
});

/** The policies of a session's live tunnels have a budget (LIVE_POLICY_BUDGET, estimated bytes). */
describe('agent policy budgets', () => {
  const policy = (tag: string) =>
    `on_tcp_connect: [{name: "${tag}${'x'.repeat(2000)}", actions: [{type: deny}]}]`;
  const fx = useTestAgentEdge('sqlite', {
    limits: {
      livePolicyBytes: {
        perSession: 2.5 * estimatedPolicyBytes(policy('a').length),
        perCredential: 100 * estimatedPolicyBytes(policy('a').length),
        perProcess: 100 * estimatedPolicyBytes(policy('a').length),
      },
    },
  });
  const bind = (agent: TestAgent, text: string) =>
    call(agent.mux, StreamType.Bind, {
      Id: '',
      Proto: 'tcp',
      ForwardsTo: 'localhost:3000',
      Opts: { TrafficPolicy: text },
      Extra: {},
    });

  it('refuses a bind whose new policy the session has no room for; the same policy binds again', async () => {
    const agent = await fx.authed();
    await bind(agent, policy('a'));
    const b = await bind(agent, policy('b'));
    const err = await expectRpcError(bind(agent, policy('c')));
    // Clients split out ERR_NGROK_ codes only; Burrow's own stay in the message.
    expect(err.message).toMatch(/ERR_BURROW_AGENT_POLICY_BYTES/);
    expect(
      fx.edge.metrics.limitRefusals.with({ limit: 'agent_policy_bytes_per_session' }).value,
    ).toBe(1);
    expect((await bind(agent, policy('a'))).URL).toMatch(/^tcp:\/\//);
    const patch = await expectRpcError(
      call(agent.mux, StreamType.PatchTunnelState, { TunnelId: b.Id, TrafficPolicy: policy('c') }),
    );
    expect(patch.message).toMatch(/ERR_BURROW_AGENT_POLICY_BYTES/);
    await call(agent.mux, StreamType.Unbind, { Id: b.Id });
    expect((await bind(agent, policy('c'))).URL).toMatch(/^tcp:\/\//);
    const other = await fx.authed();
    expect((await bind(other, policy('d'))).URL).toMatch(/^tcp:\/\//);
  });
});
