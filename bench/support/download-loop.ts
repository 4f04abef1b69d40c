/**
 * Sustained HTTP downloads through a real `burrow server` and one agent, for the edge's CPU per
 * GB on bulk (issue 29): the service, the server and the agent in their own processes, then
 * `curl` downloads of MB megabytes back to back for DURATION seconds. Prints the rate, its ratio
 * to one download straight from the service, and the edge's and agent's CPU per GB (/proc).
 *
 *   node --import tsx bench/support/download-loop.ts
 *   AGENT=ngrok MB=500 DURATION=6 FORCED_GC=1 node --import tsx bench/support/download-loop.ts
 *
 * FORCED_GC=1 takes the server's memory after a forced full GC first, as `bench:tunnel`'s memory
 * table does (docs/benchmarks.md, issue 29's sixth session); WARMUP=5 runs 5 s of keep-alive
 * requests (wrk) through the tunnel first. The line `PIDS edge=… agent=…` comes before the
 * loop, for `perf record -p`.
 */
import { execFileSync } from 'node:child_process';

import { processCpuMs, startEdgeServer } from '../edge-process.js';
import { startBulkService, type ServicePorts } from './bulk.js';
import { answer, exitOnSignals, fail, RoleProcesses } from './roles.js';
import { edgeAddress } from './sdk-agent.js';
import { serveNgrok, serveSdk, type AgentSpec } from './agent-roles.js';

const roles = new RoleProcesses(import.meta.url);
const AGENT = process.env.AGENT ?? 'sdk';
const SECONDS = Number(process.env.DURATION ?? 10);
const MB = Number(process.env.MB ?? 500);
const WARMUP = Number(process.env.WARMUP ?? 0);

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

async function main(): Promise<void> {
  const { reply: service, proc } = await roles.spawn<ServicePorts>('service');
  const edge = await startEdgeServer({});
  const spec: AgentSpec = { ...(await edgeAddress(edge)), service };
  const agent = await roles.start<{ pid: number; http: string }>(AGENT, spec);
  const host = new URL(agent.http).hostname;
  curl(edge.httpPort, host); // warm-up
  if (WARMUP > 0) {
    const url = `http://127.0.0.1:${edge.httpPort}/`;
    execFileSync('wrk', ['-t1', '-c50', `-d${WARMUP}s`, '-H', `Host: ${host}`, url]);
  }
  if (process.env.FORCED_GC === '1') await edge.gcMemory();
  const direct = MB / curl(service.http, 'localhost');
  console.log(`PIDS edge=${edge.pid} agent=${agent.pid} service=${proc.pid}`);
  const started = Date.now();
  const edgeBefore = processCpuMs(edge.pid);
  const agentBefore = processCpuMs(agent.pid);
  let seconds = 0;
  let runs = 0;
  while (Date.now() - started < SECONDS * 1000) {
    seconds += curl(edge.httpPort, host);
    runs++;
  }
  const gb = (runs * MB) / 1000;
  const rate = (runs * MB) / seconds;
  const perGb = (ms: number) => `${(ms / gb).toFixed(0)} ms`;
  console.log(
    `agent ${AGENT}: direct ${direct.toFixed(0)} MB/s, tunnel ${rate.toFixed(0)} MB/s ` +
      `(${(rate / direct).toFixed(3)} of direct), edge CPU per GB ` +
      `${perGb(processCpuMs(edge.pid) - edgeBefore)}, agent CPU per GB ` +
      `${perGb(processCpuMs(agent.pid) - agentBefore)}`,
  );
  roles.killAll();
  await edge.stop();
}

const role = process.argv[2];
const spec = process.argv[3] ? (JSON.parse(process.argv[3]) as AgentSpec) : undefined;
if (role === 'service') startBulkService().then(answer, fail);
else if (role === 'sdk') await serveSdk(spec!);
else if (role === 'ngrok') await serveNgrok(spec!);
else {
  process.once('exit', () => roles.killAll());
  exitOnSignals();
  await main().catch(fail);
  process.exit(0);
}
