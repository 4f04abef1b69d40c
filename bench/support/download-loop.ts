/**
 * Sustained HTTP downloads through a real `burrow server` and one agent, for the edge's CPU per
 * GB on bulk (issue 29): the service, the server and the agent in their own processes, then
 * `curl` downloads of MB megabytes back to back for DURATION seconds. Prints the rate, its ratio
 * to one download straight from the service, the edge's and agent's CPU per GB (/proc) and the
 * edge's read and write system calls per MB.
 *
 *   node --import tsx bench/support/download-loop.ts
 *   AGENT=ngrok MB=500 DURATION=6 FORCED_GC=1 node --import tsx bench/support/download-loop.ts
 *   ROUNDS=6 node --import tsx bench/support/download-loop.ts /tmp/wt-before /tmp/wt-after
 *
 * Given built trees (each with its `bin/` and `dist/`), one server and agent per tree, the
 * trees' loops alternated ROUNDS times (the order reversed every other round), with the medians
 * at the end: an A/B of the edge's CPU per GB on the same machine in the same minutes.
 *
 * FORCED_GC=1 takes the server's memory after a forced full GC first, as `bench:tunnel`'s memory
 * table does (docs/benchmarks.md, issue 29's sixth session); WARMUP=5 runs 5 s of keep-alive
 * requests (wrk) through the tunnel first. The line `PIDS edge=… agent=…` comes before the
 * loop, for `perf record -p`.
 */
import { execFileSync } from 'node:child_process';

import { processCpuMs, startEdgeServer, type EdgeServer } from '../edge-process.js';
import { startBulkService, type ServicePorts } from './bulk.js';
import { median, syscalls } from './load.js';
import { answer, exitOnSignals, fail, RoleProcesses } from './roles.js';
import { edgeAddress } from './sdk-agent.js';
import { serveNgrok, serveSdk, type AgentSpec } from './agent-roles.js';

const roles = new RoleProcesses(import.meta.url);
const AGENT = process.env.AGENT ?? 'sdk';
const SECONDS = Number(process.env.DURATION ?? 10);
const MB = Number(process.env.MB ?? 500);
const WARMUP = Number(process.env.WARMUP ?? 0);
const ROUNDS = Number(process.env.ROUNDS ?? 1);

/** One download with curl: seconds it took. */
function curl(port: number, host: string): number {
  const url = `http://127.0.0.1:${port}/download?bytes=${MB * 1e6}`;
  const out = execFileSync('curl', [
    '-sf',
    '-o',
    '/dev/null',
    '-H',
    `Host: ${host}`,
    '-w',
    '%{time_total}',
    url,
  ]);
  return Number(out.toString());
}

interface Tree {
  root: string | undefined;
  edge: EdgeServer;
  agentPid: number;
  host: string;
  runs: { ratio: number; edgeMsPerGb: number }[];
}

async function main(): Promise<void> {
  const { reply: service, proc } = await roles.spawn<ServicePorts>('service');
  const roots = process.argv.length > 2 ? process.argv.slice(2) : [undefined];
  const trees: Tree[] = [];
  for (const root of roots) {
    const edge = await startEdgeServer(root === undefined ? {} : { root });
    const spec: AgentSpec = { ...(await edgeAddress(edge)), service };
    const agent = await roles.start<{ pid: number; http: string }>(AGENT, spec);
    const host = new URL(agent.http).hostname;
    curl(edge.httpPort, host); // warm-up
    if (WARMUP > 0) {
      const url = `http://127.0.0.1:${edge.httpPort}/`;
      execFileSync('wrk', ['-t1', '-c50', `-d${WARMUP}s`, '-H', `Host: ${host}`, url]);
    }
    if (process.env.FORCED_GC === '1') await edge.gcMemory();
    console.log(`PIDS edge=${edge.pid} agent=${agent.pid} service=${proc.pid}`);
    trees.push({ root, edge, agentPid: agent.pid, host, runs: [] });
  }
  for (let round = 1; round <= ROUNDS; round++) {
    // Every other round in the other order: neither tree always runs first.
    for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
      const { edge, host } = tree;
      const direct = MB / curl(service.http, 'localhost');
      const started = Date.now();
      const edgeBefore = processCpuMs(edge.pid);
      const agentBefore = processCpuMs(tree.agentPid);
      const callsBefore = syscalls(edge.pid);
      let seconds = 0;
      let runs = 0;
      while (Date.now() - started < SECONDS * 1000) {
        seconds += curl(edge.httpPort, host);
        runs++;
      }
      const gb = (runs * MB) / 1000;
      const rate = (runs * MB) / seconds;
      const edgeMs = processCpuMs(edge.pid) - edgeBefore;
      const perGb = (ms: number) => `${(ms / gb).toFixed(0)} ms`;
      tree.runs.push({ ratio: rate / direct, edgeMsPerGb: edgeMs / gb });
      console.log(
        `${tree.root ?? 'this tree'} agent ${AGENT}: direct ${direct.toFixed(0)} MB/s, tunnel ` +
          `${rate.toFixed(0)} MB/s (${(rate / direct).toFixed(3)} of direct), edge CPU per GB ` +
          `${perGb(edgeMs)}, agent CPU per GB ${perGb(processCpuMs(tree.agentPid) - agentBefore)}, ` +
          `edge syscalls per MB ${((syscalls(edge.pid) - callsBefore) / (gb * 1000)).toFixed(1)}`,
      );
    }
  }
  if (ROUNDS > 1) {
    const first = trees[0]!.runs;
    for (const tree of trees.slice(1)) {
      // Round by round against the first tree: the same minutes of a shared machine.
      const cpu = tree.runs.map((r, i) => r.edgeMsPerGb / first[i]!.edgeMsPerGb);
      console.log(
        `paired ${AGENT} ${tree.root ?? 'this tree'} / ${trees[0]!.root ?? 'this tree'}: edge CPU ` +
          `per GB ${median(cpu).toFixed(3)} (rounds ${cpu.map((c) => c.toFixed(2)).join(' ')}), ` +
          `of direct ${median(tree.runs.map((r, i) => r.ratio / first[i]!.ratio)).toFixed(3)}`,
      );
    }
    for (const tree of trees) {
      console.log(
        `median of ${tree.runs.length} ${AGENT} ${tree.root ?? 'this tree'}: edge CPU per GB ` +
          `${median(tree.runs.map((r) => r.edgeMsPerGb)).toFixed(0)} ms, ` +
          `${median(tree.runs.map((r) => r.ratio)).toFixed(3)} of direct`,
      );
    }
  }
  roles.killAll();
  for (const tree of trees) await tree.edge.stop();
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
