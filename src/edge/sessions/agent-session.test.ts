import { describe, expect, it } from 'vitest';
import {
  BURROW_ALPN,
  BURROW_WINDOW,
  DEFAULT_WINDOW,
  StreamType,
  call,
  openTypedStream,
  readMessage,
  writeReply,
  type MuxStream,
} from '../../protocol/index.js';
import {
  connectTestAgent,
  expectRpcError,
  startTestAgentEdge,
  useTestAgentEdge,
} from '../../../test/support/agent-edge.js';
import { nextEvent, until } from '../../../test/support/mux.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';
import { AgentCommandError } from './agent-commands.js';

const MS = 1_000_000; // nanoseconds per millisecond

describe.each(DATABASE_KINDS)('agent sessions (%s)', (kind) => {
  const fx = useTestAgentEdge(kind, { limits: { authTimeoutMs: 1500 } });
  const connect = (alpn?: string[]) => fx.connect({ alpn });

  it('echoes heartbeats before Auth, then authenticates and registers the session', async () => {
    const agent = await connect();
    const heartbeat = agent.heartbeat(60_000);
    expect(await nextEvent<number>(heartbeat, 'beat')).toBeGreaterThanOrEqual(0);
    expect(fx.edge.registry.listSessions()).toHaveLength(0);
    const resp = await agent.auth({
      AuthToken: fx.token,
      OS: 'linux',
      Version: '1.7.0',
      Metadata: '{"site":"a"}',
    });
    expect(resp).toMatchObject({ Version: '3', ClientId: expect.stringMatching(/^ts_\w{27}$/) });
    expect(resp.Extra?.Cookie).toEqual(expect.any(String));
    const session = fx.edge.registry.session(resp.ClientId)!;
    expect(session).toMatchObject({
      os: 'linux',
      agentVersion: '1.7.0',
      metadata: '{"site":"a"}',
      transport: 'ngrok/2',
      ip: '127.0.0.1',
      region: 'local',
    });
    expect(session.credentialId).toMatch(/^cr_/);
    expect(fx.edge.metrics.sessions.with().value).toBeGreaterThanOrEqual(1);
    heartbeat.stop();
  });

  it('reads Authtoken in any key casing (Go sends Authtoken, Rust AuthToken)', async () => {
    const agent = await connect();
    const resp = await call(agent.mux, StreamType.Auth, {
      Version: ['3', '2'],
      ClientId: '',
      extra: { authtoken: fx.token },
    } as never);
    expect(resp.ClientId).toMatch(/^ts_/);
  });

  it('refuses tokens with the right codes and closes the session', async () => {
    const bot = await fx.edge.repos.botUsers.create({ name: `inactive-${kind}`, active: false });
    const inactive = await fx.edge.token({ owner_id: bot.id });
    const cases: [string, string][] = [
      ['', 'ERR_NGROK_4018'],
      ['not-a-token', 'ERR_NGROK_105'],
      [`${'A'.repeat(27)}_${'b'.repeat(32)}`, 'ERR_NGROK_107'],
      [inactive, 'ERR_NGROK_636'],
    ];
    for (const [bad, code] of cases) {
      const agent = await connect();
      const err = await expectRpcError(agent.auth({ AuthToken: bad }));
      expect(err.errorCode).toBe(code);
      await agent.mux.wait();
      expect(agent.mux.closed).toBe(true);
    }
    expect(fx.edge.metrics.agentErrors.with({ code: 'ERR_NGROK_107' }).value).toBeGreaterThan(0);
  });

  it('refuses heartbeat settings out of range (111, 112)', async () => {
    let agent = await connect();
    let err = await expectRpcError(agent.auth({ AuthToken: fx.token, HeartbeatInterval: 1 }));
    expect(err.errorCode).toBe('ERR_NGROK_111');
    agent = await connect();
    err = await expectRpcError(
      agent.auth({ AuthToken: fx.token, HeartbeatInterval: 0, HeartbeatTolerance: 3600e9 }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_112');
  });

  it('refuses RPCs before Auth and a second Auth', async () => {
    const agent = await connect();
    const early = await expectRpcError(
      call(agent.mux, StreamType.Bind, { Proto: 'https', Opts: {}, Extra: {} }),
    );
    expect(early.errorCode).toBe('ERR_NGROK_801');
    expect(early.message).toMatch(/authenticate/);
    await agent.auth({ AuthToken: fx.token });
    const again = await expectRpcError(agent.auth({ AuthToken: fx.token }));
    expect(again.message).toMatch(/already authenticated/);
  });

  it('reads at most 64 KiB of Auth, and takes one heartbeat stream before Auth', async () => {
    const big = await connect();
    const err = await expectRpcError(
      big.auth({ AuthToken: fx.token, Metadata: 'x'.repeat(100 * 1024) }),
    );
    expect(err.message).toMatch(/longer than 65536 bytes/);
    const agent = await connect();
    const first = openTypedStream(agent.mux, StreamType.Heartbeat);
    const second = openTypedStream(agent.mux, StreamType.Heartbeat);
    second.on('error', () => {});
    await nextEvent(second, 'close');
    first.write(Buffer.from([1, 2, 3, 4]));
    const echo = await nextEvent<Buffer>(first, 'data');
    expect(echo).toEqual(Buffer.from([1, 2, 3, 4]));
    expect(agent.mux.closed).toBe(false);
  });

  it('closes a session that does not authenticate in time', async () => {
    const agent = await connect();
    const started = Date.now();
    await agent.mux.wait();
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it('closes a session whose heartbeats stop, and keeps one that beats', async () => {
    const silent = await connect();
    const beating = await connect();
    // The beating agent beats six times per tolerance: a loaded CI machine may delay its timer.
    const hb = { HeartbeatInterval: 150 * MS, HeartbeatTolerance: 300 * MS };
    const a = await silent.auth({ AuthToken: fx.token, ...hb });
    const beats = beating.heartbeat(50);
    const b = await beating.auth({ AuthToken: fx.token, ...hb });
    await silent.mux.wait();
    expect(fx.edge.registry.session(a.ClientId)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(beating.mux.closed).toBe(false);
    expect(fx.edge.registry.session(b.ClientId)).toBeDefined();
    // The deadline each beat re-armed (in place) still fires once the beats stop.
    beats.stop();
    await beating.mux.wait();
    expect(fx.edge.registry.session(b.ClientId)).toBeUndefined();
  });

  it('uses the Burrow window for agents offering burrow/1 and the standard one otherwise', async () => {
    const ours = await connect([BURROW_ALPN]);
    const theirs = await connect();
    const a = await ours.auth({ AuthToken: fx.token });
    const b = await theirs.auth({ AuthToken: fx.token });
    expect(fx.edge.registry.session(a.ClientId)!.transport).toBe('burrow/1');
    const live = (id: string) => fx.edge.listener.sessions().find((s) => s.id === id)!;
    expect(live(a.ClientId).mux.window).toBe(BURROW_WINDOW);
    expect(live(b.ClientId).mux.window).toBe(DEFAULT_WINDOW);
  });

  it('sends Stop and Restart only to agents that support them', async () => {
    const agent = await connect();
    const resp = await agent.auth({
      AuthToken: fx.token,
      StopUnsupportedError: '',
      RestartUnsupportedError: 'not on windows',
    });
    const seen: number[] = [];
    agent.typed.on('stream', (stream: MuxStream, type: number) => {
      seen.push(type);
      void readMessage(stream).then(() => writeReply(stream, { Error: null }));
    });
    const session = fx.edge.registry.session(resp.ClientId)!;
    await session.stop();
    expect(seen).toEqual([StreamType.Stop]);
    const restart = await session.restart().catch((e: unknown) => e);
    expect(restart).toBeInstanceOf(AgentCommandError);
    expect(restart).toMatchObject({ code: 'ERR_NGROK_804', statusCode: 400 });
    expect((restart as Error).message).toMatch(/not on windows/);

    const old = await connect();
    const oldResp = await old.auth({ AuthToken: fx.token, StopUnsupportedError: null });
    await expect(fx.edge.registry.session(oldResp.ClientId)!.stop()).rejects.toMatchObject({
      code: 'ERR_NGROK_805',
    });
  });

  it('reports an agent that fails a command (808)', async () => {
    const agent = await connect();
    const resp = await agent.auth({ AuthToken: fx.token, StopUnsupportedError: '' });
    agent.typed.on('stream', (stream: MuxStream) => {
      void readMessage(stream).then(() => writeReply(stream, { Error: 'disk on fire' }));
    });
    await expect(fx.edge.registry.session(resp.ClientId)!.stop()).rejects.toMatchObject({
      code: 'ERR_NGROK_808',
      statusCode: 502,
      message: expect.stringMatching(/disk on fire/),
    });
  });

  it('stops one tunnel with StopTunnel', async () => {
    const agent = await connect();
    const resp = await agent.auth({ AuthToken: fx.token });
    const bound = await call(agent.mux, StreamType.Bind, {
      Id: 'my-bind',
      Proto: 'https',
      Opts: {},
      Extra: {},
    });
    const got = new Promise<unknown>((resolve) =>
      agent.typed.once('stream', (stream: MuxStream, type: number) => {
        void readMessage(stream).then((m) => resolve({ type, ...m }));
      }),
    );
    const live = fx.edge.listener.sessions().find((s) => s.id === resp.ClientId)!;
    expect(live.stopTunnel(bound.Extra.TunnelID!, 'removed by admin', 'ERR_NGROK_1')).toBe(true);
    expect(await got).toEqual({
      type: StreamType.StopTunnel,
      Id: 'my-bind',
      Message: 'removed by admin',
      ErrorCode: 'ERR_NGROK_1',
    });
    expect(fx.edge.registry.tunnel(bound.Extra.TunnelID!)).toBeUndefined();
  });

  it('drains: GOAWAY to every agent, sessions end', async () => {
    const other = await startTestAgentEdge(kind);
    try {
      const agent = await connectTestAgent(other);
      await agent.auth({ AuthToken: await other.token() });
      const goaway = nextEvent<{ code: number; message: string }>(agent.mux, 'goaway');
      await other.listener.drain('maintenance');
      expect(await goaway).toMatchObject({ code: 0, message: 'maintenance' });
      await until(() => other.registry.listSessions().length === 0);
    } finally {
      await other.close();
    }
  });
});
