import { describe, expect, it } from 'vitest';
import { ErrorCode, MuxError, StreamType, call } from '../../protocol/index.js';
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
