/**
 * A test edge for the tests of one bind option (Opts.HostHeaderRewrite, Opts.ProxyProto…): one
 * SQLite edge per describe block, agents authenticated on it and closed after each test, a Bind
 * with the option under test, and the stand-in another cluster node would build from the
 * tunnel's row. Call it in the describe block: it registers the hooks.
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import { RemoteTunnel, tunnelRow } from '../../src/edge/cluster/online-rows.js';
import type { OnlineTunnel } from '../../src/edge/registry/tunnel-registry.js';
import { StreamType, call, type BindOpts, type BindResp } from '../../src/protocol/index.js';
import {
  connectTestAgent,
  startTestAgentEdge,
  type TestAgent,
  type TestAgentEdge,
} from './agent-edge.js';

export interface BindOptsEdge {
  /** The edge (set once the describe block's beforeAll ran). */
  readonly edge: TestAgentEdge;
  /** A new agent, authenticated; closed after the test. */
  agent(): Promise<TestAgent>;
  /** Bind `proto` on `agent` with `opts`, forwarding to the ForwardsTo given. */
  bind(agent: TestAgent, proto: string, opts: BindOpts): Promise<BindResp>;
}

/**
 * @example
 * const t = bindOptsEdge('localhost:3000');
 * it('…', async () => { const b = await t.bind(await t.agent(), 'tcp', { ProxyProto: 2 }); });
 */
export function bindOptsEdge(forwardsTo: string): BindOptsEdge {
  let edge: TestAgentEdge | undefined;
  let token = '';
  const agents: TestAgent[] = [];
  beforeAll(async () => {
    edge = await startTestAgentEdge('sqlite');
    token = await edge.token();
  });
  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
  });
  afterAll(async () => edge?.close());
  return {
    get edge(): TestAgentEdge {
      if (!edge) throw new Error('the edge starts in beforeAll');
      return edge;
    },
    async agent(): Promise<TestAgent> {
      const a = await connectTestAgent(this.edge);
      agents.push(a);
      await a.auth({ AuthToken: token });
      return a;
    },
    bind: (agent, proto, opts) =>
      call(agent.mux, StreamType.Bind, {
        Id: '',
        Proto: proto,
        ForwardsTo: forwardsTo,
        Opts: opts,
        Extra: {},
      }),
  };
}

/**
 * `tunnel`'s cluster row, and the stand-in another node builds from it (whose connect fails).
 * @example expect(clusterStandIn(tunnel).standIn.proxyProto).toBe(1)
 */
export function clusterStandIn(tunnel: OnlineTunnel): {
  row: ReturnType<typeof tunnelRow>;
  standIn: RemoteTunnel;
} {
  const row = tunnelRow(tunnel, 'node-a', 'cr_x', undefined);
  return { row, standIn: new RemoteTunnel(row, () => Promise.reject(new Error('not here'))) };
}
