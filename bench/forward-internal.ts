/**
 * The cost of the forward-internal hop: keep-alive requests through a cloud endpoint whose policy
 * forwards to an internal endpoint (`https://bench.internal`), against the same agent's public
 * endpoint reached directly, both forwarding to one local service. The hop is in-process (no new
 * connection), so the goal is a ratio of at least 0.9. Rounds are interleaved so drift hits both.
 *
 *   node --import tsx bench/forward-internal.ts
 *   DURATION=5 CONNECTIONS=50 ROUNDS=3 node --import tsx bench/forward-internal.ts
 *
 * Processes as in bench/policy-tunnel.ts: the edge, the Burrow SDK agent, the local service, one
 * load generator per measurement, and this coordinating process.
 */
import { CloudEndpoints } from '../src/edge/binds/cloud-endpoints.js';
import { machine } from './report.js';
import { compareRoutes, runTunnelBench } from './support/load.js';
import { answer, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const CLOUD_HOST = 'front.bench.example';

type EdgeInfo = EdgeAddress & { httpPort: number };

async function serveEdge(): Promise<void> {
  const { edge, info } = await startBenchEdge();
  await edge.repos.cloudEndpoints.create({
    url: `http://${CLOUD_HOST}`,
    bindings: ['public'],
    traffic_policy: JSON.stringify({
      on_http_request: [
        { actions: [{ type: 'forward-internal', config: { url: 'https://bench.internal' } }] },
      ],
    }),
  });
  const cloud = new CloudEndpoints({
    repos: edge.repos,
    registry: edge.registry,
    publicUrl: (proto, where) => `${proto}://${where}`,
  });
  await cloud.start();
  answer(info);
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connectAgent(spec.edge);
  const direct = await session.httpEndpoint({ scheme: 'http', forward: spec.service });
  await session.httpEndpoint({ domain: 'bench.internal', forward: spec.service });
  answer([new URL(direct.url!).hostname, CLOUD_HOST]);
}

const roles = new RoleProcesses(import.meta.url);

async function main(): Promise<void> {
  const edge = await roles.start<EdgeInfo>('edge');
  const service = await roles.start<{ http: number }>('service');
  const hosts = await roles.start<string[]>('agent', { edge, service: service.http });
  const names = ['agent endpoint, directly', 'cloud endpoint → forward-internal → agent'];
  const table = await compareRoutes(roles, {
    port: edge.httpPort,
    hosts,
    names,
    rounds: ROUNDS,
  });
  console.log(
    `\nforward-internal hop, ${machine()}; ${CONNECTIONS} keep-alive connections, ` +
      `${DURATION} s per run, median of ${ROUNDS} interleaved rounds.\n`,
  );
  console.log(table);
}

runTunnelBench(roles, { main, serveEdge, serveAgent, connections: CONNECTIONS, seconds: DURATION });
