import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RpcError, StreamType, call } from '../../protocol/index.js';
import {
  connectTestAgent,
  startTestAgentEdge,
  type TestAgent,
  type TestAgentEdge,
} from '../../../test/support/agent-edge.js';
import { DATABASE_KINDS } from '../../../test/support/stores.js';

const bind = (agent: TestAgent) =>
  call(agent.mux, StreamType.Bind, {
    Id: '',
    Proto: 'https',
    ForwardsTo: 'localhost:3000',
    Opts: {},
    Extra: {},
  });

describe.each(DATABASE_KINDS)('revocation of live sessions (%s)', (kind) => {
  let edge: TestAgentEdge;
  const agents: TestAgent[] = [];

  /** An authenticated agent with a fresh credential (owned by `owner_id` when given) and one tunnel. */
  async function online(owner_id?: string) {
    const cred = await edge.repos.credentials.create({ owner_id });
    const agent = await connectTestAgent(edge);
    agents.push(agent);
    await agent.auth({ AuthToken: cred.token! });
    const bound = await bind(agent);
    expect(edge.registry.byHost(new URL(bound.URL).hostname)).toBeDefined();
    return { agent, cred, host: new URL(bound.URL).hostname };
  }

  /** Milliseconds until the agent's session ends, and the GOAWAY text it got. */
  async function cut(agent: TestAgent, started: number) {
    await agent.mux.wait();
    return { ms: Date.now() - started, goaway: agent.mux.remoteGoAway?.message ?? '' };
  }

  beforeAll(async () => {
    edge = await startTestAgentEdge(kind);
  });
  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
  });
  afterAll(async () => edge.close());

  it('closes the session of a deleted credential within 2 s (periodic check) with ERR_NGROK_107', async () => {
    const { agent, cred, host } = await online();
    const started = Date.now();
    await edge.repos.credentials.delete(cred.id);
    // A bind right after the change is refused, whether or not the watch has run yet.
    const err = await bind(agent).catch((e: unknown) => e);
    if (err instanceof RpcError) expect(err.errorCode).toBe('ERR_NGROK_107');
    const { ms, goaway } = await cut(agent, started);
    expect(ms).toBeLessThan(2000);
    expect(goaway).toContain('ERR_NGROK_107');
    expect(edge.registry.byHost(host)).toBeUndefined();
    expect(edge.registry.listSessions()).toHaveLength(0);
  });

  it('closes at once on checkNow() (the same process changed it)', async () => {
    const { agent, cred } = await online();
    await edge.repos.credentials.delete(cred.id);
    const started = Date.now();
    await edge.listener.revocation.checkNow();
    const { ms } = await cut(agent, started);
    expect(ms).toBeLessThan(300);
  });

  it('closes the sessions of a deactivated bot user with ERR_NGROK_636, and keeps others', async () => {
    const bot = await edge.repos.botUsers.create({ name: `bot-${kind}` });
    const { agent } = await online(bot.id);
    const other = await online();
    await edge.repos.botUsers.update(bot.id, { active: false });
    await edge.listener.revocation.checkNow();
    const { goaway } = await cut(agent, Date.now());
    expect(goaway).toContain('ERR_NGROK_636');
    expect(other.agent.mux.closed).toBe(false);
    expect(edge.registry.byHost(other.host)).toBeDefined();
  });

  it('refuses a bind when the store says the credential is gone, before any check ran', async () => {
    const { agent, cred } = await online();
    edge.listener.revocation.stop();
    try {
      await edge.repos.credentials.delete(cred.id);
      const err = await bind(agent).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RpcError);
      expect((err as RpcError).errorCode).toBe('ERR_NGROK_107');
    } finally {
      edge.listener.revocation.start();
    }
  });
});
