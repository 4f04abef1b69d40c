/**
 * TCP edge benchmark: bulk throughput and connection rate to one local service, measured in one
 * run directly, through a TCP edge (hostport listener -> labeled tunnel of an SDK agent), and
 * through an ordinary TCP endpoint of the same agent, so the edge's own cost shows against both.
 *
 *   node --import tsx bench/edge-throughput.ts
 *   MB=512 RUNS=3 DURATION=5 CONNECTIONS=20 node --import tsx bench/edge-throughput.ts
 *
 * Four processes, each with its own event loop as in production: the edge (agent listener,
 * ingress, edge routes, SQLite store), the SDK agent, the local service, and this process as the
 * public client.
 */
import { EdgeRoutes } from '../src/edge/binds/edge-routes.js';
import { edgeFixtures } from '../test/support/edge-fixtures.js';
import { freePort } from '../test/support/ingress.js';
import { fmt, machine, markdownTable } from './report.js';
import { MIB, startBulkService, tcpBulk, tcpPing, type ServicePorts } from './support/bulk.js';
import { closedLoop } from './support/load.js';
import { answer, fail, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const MB = Number(process.env.MB ?? 256);
const RUNS = Number(process.env.RUNS ?? 3);
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 20);

// ---- the edge (child) and the SDK agent (child) -----------------------------------------

interface EdgeInfo extends EdgeAddress {
  edgeId: string;
  edgePort: number;
}

async function serveEdge(): Promise<void> {
  const { edge, info: address } = await startBenchEdge();
  const runtime = new EdgeRoutes({ repos: edge.repos, registry: edge.registry });
  await runtime.start();
  const edgePort = await freePort();
  const { addr } = await edgeFixtures(edge.store).reservedAddr(edgePort);
  const created = await edge.repos.edges.create('tcp', { hostports: [addr] });
  const backend = await edge.repos.backends.tunnelGroups.create({ labels: { edge: created.id } });
  await edge.repos.edges.setModule('tcp', created.id, 'backend', { backend_id: backend.id });
  await runtime.sync();
  await edge.ingress.tcp.listening(edgePort);
  const info: EdgeInfo = { ...address, edgeId: created.id, edgePort };
  answer(info);
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connectAgent(spec.edge);
  await session.labeledTunnel({ labels: { edge: spec.edge.edgeId }, forward: spec.service });
  const tcp = await session.tcpEndpoint({ forward: spec.service });
  answer({ endpointPort: Number(new URL(tcp.url!).port) });
}

// ---- the public client and the report (this process) ------------------------------------

const roles = new RoleProcesses(import.meta.url);

/** New connections per second (connect, one exchange, close) from CONNECTIONS workers. */
async function connectionRate(port: number) {
  const r = await closedLoop(DURATION, CONNECTIONS, () => tcpPing(port));
  if (r.errors > 0) process.stderr.write(`connection rate on ${port}: ${r.errors} errors\n`);
  return r;
}

async function main(): Promise<void> {
  const service = await roles.start<ServicePorts>('service');
  const edge = await roles.start<EdgeInfo>('edge');
  const agent = await roles.start<{ endpointPort: number }>('agent', {
    edge,
    service: service.tcp,
  });
  const targets = { direct: service.tcp, edge: edge.edgePort, endpoint: agent.endpointPort };
  const rows: string[][] = [];
  type Target = keyof typeof targets;
  const order: Target[] = ['direct', 'edge', 'endpoint'];
  // Rounds interleave the three paths, so warm-up and machine noise hit them alike.
  for (const direction of ['up', 'down'] as const) {
    const best: Record<Target, number> = { direct: 0, edge: 0, endpoint: 0 };
    for (let run = 0; run < RUNS; run++) {
      for (const t of order)
        best[t] = Math.max(best[t], await tcpBulk(targets[t], direction, MB * MIB));
    }
    rows.push([
      `TCP bulk ${MB} MiB, ${direction === 'up' ? 'client to service' : 'service to client'}`,
      ...order.map((t) => `${fmt(best[t])} MiB/s`),
      `${fmt((100 * best.edge) / best.direct)} %`,
    ]);
    process.stderr.write(`bulk ${direction}: done\n`);
  }
  type Rate = Awaited<ReturnType<typeof connectionRate>>;
  const rate: Partial<Record<Target, Rate>> = {};
  for (let run = 0; run < RUNS; run++) {
    for (const t of order) {
      const r = await connectionRate(targets[t]);
      if (r.rate > (rate[t]?.rate ?? 0)) rate[t] = r;
    }
  }
  const show = (r: Rate | undefined) =>
    r ? `${fmt(r.rate)} conn/s (p50 ${fmt(r.p50, 1)} / p99 ${fmt(r.p99, 1)} ms)` : '';
  rows.push([
    `New connection per exchange, ${CONNECTIONS} at a time`,
    ...order.map((t) => show(rate[t])),
    `${fmt((100 * (rate.edge?.rate ?? 0)) / (rate.direct?.rate ?? 1))} %`,
  ]);
  roles.killAll('SIGKILL');
  console.log(
    `\nTCP edge throughput, ${machine()}; ` +
      `best of ${RUNS} interleaved rounds; ${DURATION} s per connection-rate run.\n`,
  );
  console.log(
    markdownTable(
      ['case', 'direct', 'TCP edge (labeled tunnel)', 'TCP endpoint (same agent)', 'edge / direct'],
      rows,
    ),
  );
}

const role = process.argv[2];
if (role === 'service') startBulkService().then(answer, fail);
else if (role === 'edge') serveEdge().catch(fail);
else if (role === 'agent') {
  serveAgent(JSON.parse(process.argv[3]!) as { edge: EdgeInfo; service: number }).catch(fail);
} else {
  main().then(() => process.exit(0), fail);
}
