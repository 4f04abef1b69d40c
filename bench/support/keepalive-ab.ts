/**
 * Keep-alive requests through two built trees of Burrow at once, alternated, for a before/after
 * of the edge's CPU per request (issue 29): one service, one `burrow server` per tree (each from
 * its own `bin/` and `dist/`), one agent per server, then `wrk` against each edge in turn, ROUNDS
 * times, with the service alone in between. Both trees see the same machine in the same minutes,
 * which on a shared machine swings more than most changes do.
 *
 *   node --import tsx bench/support/keepalive-ab.ts /tmp/wt-before /work/main
 *   AGENT=ngrok ROUNDS=4 DURATION=5 node --import tsx bench/support/keepalive-ab.ts <tree> <tree>
 *
 * Printed per run: req/s and its ratio to the service alone (the run before it), the edge's CPU
 * per request from /proc (user + system) and its read and write system calls per request
 * (/proc/<pid>/io, every kind of read and write: sockets, TLS, epoll not counted); at the end,
 * the median of each over the rounds.
 */
import { loadavg } from 'node:os';
import { processCpuMs, startEdgeServer, type EdgeServer } from '../edge-process.js';
import { startBulkService, type ServicePorts } from './bulk.js';
import { ioCalls, median } from './load.js';
import { wrk } from './wrk.js';
import { answer, exitOnSignals, fail, RoleProcesses } from './roles.js';
import { edgeAddress } from './sdk-agent.js';
import { serveNgrok, serveSdk, type AgentSpec } from './agent-roles.js';

const roles = new RoleProcesses(import.meta.url);
const AGENT = process.env.AGENT ?? 'sdk';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const WARMUP = Number(process.env.WARMUP ?? 3);

interface Tree {
  root: string;
  edge: EdgeServer;
  host: string;
}

async function main(): Promise<void> {
  const trees = process.argv.slice(2);
  if (trees.length === 0) throw new Error('usage: keepalive-ab.ts <built tree> [<built tree> …]');
  const { reply: service } = await roles.spawn<ServicePorts>('service');
  const started: Tree[] = [];
  for (const root of trees) {
    const edge = await startEdgeServer({ root });
    const spec: AgentSpec = { ...(await edgeAddress(edge)), service };
    const agent = await roles.start<{ pid: number; http: string }>(AGENT, spec);
    started.push({ root, edge, host: new URL(agent.http).hostname });
  }
  const load = (port: number, host: string, seconds: number) =>
    wrk({ port, host, connections: CONNECTIONS, seconds });
  await load(service.http, 'localhost', 3);
  for (const tree of started) await load(tree.edge.httpPort, tree.host, WARMUP);
  const results = new Map<Tree, { cpuUs: number; ratio: number; reads: number; writes: number }[]>(
    started.map((t) => [t, []]),
  );
  for (let round = 1; round <= ROUNDS; round++) {
    // Every other round in the other order: neither tree always runs first.
    for (const tree of round % 2 === 1 ? started : [...started].reverse()) {
      const direct = await load(service.http, 'localhost', DURATION);
      const loadAverage = loadavg()[0]!.toFixed(1);
      const before = processCpuMs(tree.edge.pid);
      const callsBefore = ioCalls(tree.edge.pid);
      const run = await load(tree.edge.httpPort, tree.host, DURATION);
      const cpuMs = processCpuMs(tree.edge.pid) - before;
      const calls = ioCalls(tree.edge.pid);
      const reads = (calls.reads - callsBefore.reads) / run.requests;
      const writes = (calls.writes - callsBefore.writes) / run.requests;
      results.get(tree)!.push({
        cpuUs: (cpuMs * 1000) / run.requests,
        ratio: run.rate / direct.rate,
        reads,
        writes,
      });
      console.log(
        `round ${round} ${AGENT} ${tree.root}: ${run.rate.toFixed(0)} req/s ` +
          `(${(run.rate / direct.rate).toFixed(2)} of direct ${direct.rate.toFixed(0)}), ` +
          `edge CPU ${((cpuMs * 1000) / run.requests).toFixed(1)} µs/request, ` +
          `syscalls/request ${reads.toFixed(2)} read ${writes.toFixed(2)} write` +
          `, load ${loadAverage}` +
          (run.errors ? ` [${run.errors} errors]` : ''),
      );
    }
  }
  for (const tree of started) {
    const runs = results.get(tree)!;
    console.log(
      `median of ${runs.length} ${AGENT} ${tree.root}: edge CPU ` +
        `${median(runs.map((r) => r.cpuUs)).toFixed(1)} µs/request, ` +
        `${median(runs.map((r) => r.ratio)).toFixed(2)} of direct, syscalls/request ` +
        `${median(runs.map((r) => r.reads)).toFixed(2)} read ` +
        `${median(runs.map((r) => r.writes)).toFixed(2)} write`,
    );
  }
  // Each tree against the first, round by round (the same minutes of a shared machine): the
  // median of the per-round ratios moves less with the machine than the medians above.
  const first = results.get(started[0]!)!;
  for (const tree of started.slice(1)) {
    const runs = results.get(tree)!;
    const cpu = runs.map((r, i) => r.cpuUs / first[i]!.cpuUs);
    const rate = runs.map((r, i) => r.ratio / first[i]!.ratio);
    console.log(
      `paired ${AGENT} ${tree.root} / ${started[0]!.root}: edge CPU per request ` +
        `${median(cpu).toFixed(3)} (rounds ${cpu.map((c) => c.toFixed(2)).join(' ')}), ` +
        `of direct ${median(rate).toFixed(3)}`,
    );
  }
  roles.killAll();
  for (const tree of started) await tree.edge.stop();
}

const role = process.argv[2];
const isRole = role === 'service' || role === 'sdk' || role === 'ngrok';
const spec = isRole && process.argv[3] ? (JSON.parse(process.argv[3]) as AgentSpec) : undefined;
if (role === 'service') startBulkService().then(answer, fail);
else if (role === 'sdk') await serveSdk(spec!);
else if (role === 'ngrok') await serveNgrok(spec!);
else {
  process.once('exit', () => roles.killAll());
  exitOnSignals();
  await main().catch(fail);
  process.exit(0);
}
