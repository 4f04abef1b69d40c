import { readdirSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledPolicyCacheSize } from '../src/policy/index.js';
import {
  StreamType,
  call,
  openTypedStream,
  readProxyHeader,
  type MuxStream,
} from '../src/protocol/index.js';
import { connectTestAgent, type TestAgent } from './support/agent-edge.js';
import { reportFuzz } from './support/fuzz.js';
import { metricSum, visit } from './support/ingress.js';
import { startSdkTestEdge, type SdkTestEdge } from './support/sdk-edge.js';

/**
 * Issue 36's property: whatever several agents and visitors do (bind, unbind, patch, connect,
 * disconnect, reset, requests left unfinished, visitors who hang up), once they are gone and the
 * edge has drained, everything it counts is back where it started: sessions, tunnels, policy
 * states, compiled policies, bytes of requests in progress, proxied streams, public connections
 * and the process's descriptors.
 */

const POLICIES = [
  undefined,
  'on_http_request: [{expressions: ["req.url.path == \'/deny\'"], actions: [{type: deny}]}]',
  'on_http_request: [{actions: [{type: add-headers, config: {headers: {x-churn: "1"}}}]}]',
] as const;

type Action =
  | { kind: 'connect' }
  | { kind: 'disconnect' | 'reset'; agent: number }
  | { kind: 'bind'; agent: number; policy: number }
  | { kind: 'unbind' | 'patch'; agent: number; tunnel: number; policy: number }
  | { kind: 'unfinished'; agent: number }
  | { kind: 'visit' | 'hang-up'; tunnel: number };

const index = fc.nat({ max: 7 });
const ACTION: fc.Arbitrary<Action> = fc.oneof(
  fc.constant({ kind: 'connect' as const }),
  fc.record({ kind: fc.constantFrom('disconnect' as const, 'reset' as const), agent: index }),
  fc.record({ kind: fc.constant('bind' as const), agent: index, policy: fc.nat({ max: 2 }) }),
  fc.record({
    kind: fc.constantFrom('unbind' as const, 'patch' as const),
    agent: index,
    tunnel: index,
    policy: fc.nat({ max: 2 }),
  }),
  fc.record({ kind: fc.constant('unfinished' as const), agent: index }),
  fc.record({ kind: fc.constantFrom('visit' as const, 'hang-up' as const), tunnel: index }),
);

/** What the edge holds now, as gauges and counts. */
function gauges(edge: SdkTestEdge) {
  const text = edge.metrics.render();
  const counts = edge.listener.policies.counts();
  return {
    sessions: edge.listener.sessions().length,
    tunnels: edge.registry.listTunnels().length,
    tunnelGauge: metricSum(text, 'burrow_tunnels'),
    liveStates: counts.live,
    livePolicyBytes: counts.liveBytes,
    retainedStates: counts.retained,
    pendingBytes: edge.metrics.rpcPendingBytes.with().value,
    proxyStreams: edge.listener.sessions().reduce((n, s) => n + s.limiter.active, 0),
    publicConnections: metricSum(text, 'burrow_connections_active'),
    descriptors: readdirSync('/proc/self/fd').length,
  };
}

describe('agent and visitor churn returns every gauge to its start', () => {
  let edge: SdkTestEdge;
  let token = '';

  beforeAll(async () => {
    edge = await startSdkTestEdge('sqlite', { policyRetention: { retainMs: 50 } });
    token = await edge.token();
  });
  afterAll(async () => edge?.close());

  /** Run one sequence of actions; what it leaves open is closed by the drain after it. */
  async function run(actions: Action[]): Promise<void> {
    const agents: TestAgent[] = [];
    const everyAgent: TestAgent[] = [];
    const tunnels: { agent: TestAgent; id: string; host: string }[] = [];
    const streams: MuxStream[] = [];
    const pick = <T>(list: T[], i: number): T | undefined =>
      list.length === 0 ? undefined : list[i % list.length];
    /** Agents answer /fast at once and leave /slow unanswered; `onStream` hears of each stream. */
    let onStream: (() => void) | undefined;
    const serve = (agent: TestAgent): void => {
      agent.typed.on('stream', (stream: MuxStream, type: number) => {
        stream.on('error', () => undefined);
        if (type !== StreamType.Proxy) return stream.destroy();
        streams.push(stream);
        void readProxyHeader(stream, 5000).then(
          () => {
            onStream?.();
            stream.once('data', (head: Buffer) => {
              if (head.toString('latin1').startsWith('GET /fast')) {
                stream.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok');
              }
            });
          },
          () => stream.destroy(),
        );
      });
    };
    for (const action of actions) {
      const agent = 'agent' in action ? pick(agents, action.agent) : undefined;
      switch (action.kind) {
        case 'connect': {
          const next = await connectTestAgent(edge);
          serve(next);
          everyAgent.push(next);
          await next.auth({ AuthToken: token });
          agents.push(next);
          break;
        }
        case 'disconnect':
        case 'reset':
          if (!agent) break;
          agents.splice(agents.indexOf(agent), 1);
          if (action.kind === 'reset') agent.socket.destroy();
          else agent.mux.goAway(0, 'bye');
          break;
        case 'bind': {
          if (!agent || agent.mux.closed) break;
          const policy = POLICIES[action.policy];
          const bound = await call(agent.mux, StreamType.Bind, {
            Id: '',
            Proto: 'http',
            ForwardsTo: 'churn',
            Opts: policy ? { TrafficPolicy: policy } : {},
            Extra: {},
          }).catch(() => undefined);
          if (bound) tunnels.push({ agent, id: bound.Id, host: new URL(bound.URL).hostname });
          break;
        }
        case 'unbind':
        case 'patch': {
          const tunnel = tunnels.filter((t) => t.agent === agent)[action.tunnel % 8];
          if (!tunnel || tunnel.agent.mux.closed) break;
          if (action.kind === 'unbind') {
            await call(tunnel.agent.mux, StreamType.Unbind, { Id: tunnel.id }).catch(() => null);
            tunnels.splice(tunnels.indexOf(tunnel), 1);
          } else {
            await call(tunnel.agent.mux, StreamType.PatchTunnelState, {
              TunnelId: tunnel.id,
              Metadata: `patched ${action.policy}`,
              TrafficPolicy: POLICIES[action.policy] ?? '',
            }).catch(() => null);
          }
          break;
        }
        case 'unfinished': {
          if (!agent || agent.mux.closed) break;
          // A Bind that never ends: held until the RPC timeout, or the session's end.
          const stream = openTypedStream(agent.mux, StreamType.Bind, Buffer.from('{"Id":"'));
          stream.on('error', () => undefined);
          break;
        }
        case 'visit':
        case 'hang-up': {
          const tunnel = pick(tunnels, action.tunnel);
          if (!tunnel) break;
          if (action.kind === 'visit') await visit(edge.httpPort, tunnel.host, '/fast');
          else {
            const seen = new Promise<void>((resolve) => (onStream = resolve));
            await Promise.race([
              // The visitor hangs up once the agent has the stream.
              visit(edge.httpPort, tunnel.host, '/slow', seen),
              new Promise((resolve) => setTimeout(resolve, 2000)),
            ]);
            onStream = undefined;
          }
          break;
        }
      }
    }
    // The drain: the agents leave (streams they still hold go with their sessions).
    for (const agent of everyAgent) agent.close();
    for (const stream of streams) stream.destroy();
  }

  it('after each random sequence and a drain', async () => {
    // One sequence first, so that what lives as long as the process (the compiled policies of
    // POLICIES, the sockets' pools) exists before the start is read.
    await run([{ kind: 'connect' }, { kind: 'bind', agent: 0, policy: 1 }]);
    await run([{ kind: 'connect' }, { kind: 'bind', agent: 0, policy: 2 }]);
    await expect.poll(() => gauges(edge).sessions).toBe(0);
    await expect.poll(() => gauges(edge).retainedStates).toBe(0);
    const start = gauges(edge);
    const compiled = compiledPolicyCacheSize().entries;
    let cases = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(ACTION, { minLength: 1, maxLength: 25 }), async (actions) => {
        cases++;
        await run([{ kind: 'connect' }, ...actions]);
        await expect.poll(() => gauges(edge), { timeout: 15_000 }).toEqual(start);
        expect(compiledPolicyCacheSize().entries).toBe(compiled);
      }),
      { numRuns: 25, endOnFailure: true },
    );
    reportFuzz('agent and visitor churn', cases);
  }, 120_000);
});
