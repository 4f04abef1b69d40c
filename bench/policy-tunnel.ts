/**
 * The cost of a traffic policy on requests per second through a whole tunnel: public client ->
 * edge ingress -> agent session -> Burrow SDK -> local service, for three endpoints of one agent
 * in the same run: no policy, a typical three-rule policy (deny by header, add a request header,
 * add a response header), and the ten-rule policy of the tests (every rule evaluated, nothing
 * refused). Keep-alive HTTP with autocannon; the rounds are interleaved (every other one in reverse order) so drift hits every case.
 *
 *   node --import tsx bench/policy-tunnel.ts
 *   DURATION=5 CONNECTIONS=50 ROUNDS=3 node --import tsx bench/policy-tunnel.ts
 *   CASES=0,2 PROFILE_DIR=/tmp/prof node --import tsx bench/policy-tunnel.ts
 *
 * CASES picks cases by index (0 is always measured: it is the base). PROFILE_DIR adds one run per
 * case after the rounds with the edge's V8 CPU profiler on, written as `<dir>/<index>.cpuprofile`
 * (read them with bench/cpu-profile.ts): what the edge spends per request, by function, under the
 * same load as the figures.
 *
 * Five processes, each with its own event loop as in production: the edge (agent listener,
 * ingress, SQLite store), the SDK agent, the local service, the load generator (one per
 * measurement) and this process, which only coordinates. Besides requests per second, the edge
 * process's CPU time per request is reported: it is what a policy adds, and it varies much less
 * than throughput when other work shares the machine.
 */
import type { AddressInfo } from 'node:net';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import { TEN_RULE_HTTP_POLICY } from '../test/support/policy-fixtures.js';
import { fmt, machine, markdownTable } from './report.js';
import { median, runTunnelBench, syscalls, type RateResult } from './support/load.js';
import { answer, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const PROFILE_DIR = process.env.PROFILE_DIR;

const THREE_RULES = `
on_http_request:
  - expressions: ["'x-block' in req.headers"]
    actions: [{type: deny}]
  - actions: [{type: add-headers, config: {headers: {x-client-ip: "\${conn.client_ip}"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-served-by: burrow}}}]
`;

/** An IP allowlist: on_tcp_connect only, so the lean relay carries it (once per connection). */
const ALLOWLIST = `
on_tcp_connect:
  - actions: [{type: restrict-ips, config: {allow: ["127.0.0.0/8", "10.0.0.0/8"]}}]
`;

/** A rewritten target and a status observer: on the lean relay since issue 28 (third session). */
const REWRITE_BREAKER = `
on_http_request:
  - actions:
      - {type: circuit-breaker, config: {error_threshold: 0.5}}
      - {type: url-rewrite, config: {from: "/api/(.*)", to: "/$1"}}
`;

const ALL_CASES = [
  { name: 'no policy', policy: undefined },
  { name: 'IP allowlist (on_tcp_connect only)', policy: ALLOWLIST },
  { name: '3 rules (deny by header, add request and response headers)', policy: THREE_RULES },
  { name: 'circuit-breaker and url-rewrite', policy: REWRITE_BREAKER },
  { name: '10 rules (the test policy, all evaluated)', policy: TEN_RULE_HTTP_POLICY },
] as const;

const picked = process.env.CASES?.split(',').map(Number);
const CASES = ALL_CASES.filter((_, i) => i === 0 || !picked || picked.includes(i));

interface EdgeInfo extends EdgeAddress {
  httpPort: number;
  /** Answers GET with the edge process's CPU time so far, in microseconds. */
  cpuPort: number;
}
interface AgentInfo {
  hosts: string[];
  cpuPort: number;
}
interface Measured extends RateResult {
  /** Edge CPU time per request, microseconds. */
  cpuUs: number;
  /** The edge's time in garbage collection per request, microseconds. */
  gcUs: number;
  /** The edge's read and write system calls per request. */
  syscalls: number;
  /** The agent's CPU time per request, microseconds. */
  agentCpuUs: number;
  /** The service's and the load generator's CPU time per request, microseconds. */
  otherCpuUs: number;
  /** The service's and the load generator's read and write system calls per request. */
  otherSyscalls: number;
}

/**
 * A loopback server answering GET with this process's CPU time so far, in microseconds, and its
 * read and write system calls (/proc/self/io: sockets and files alike) and its time in garbage
 * collection (µs, from V8's gc events); `extra`
 * may answer other paths first (it returns true when it did). Resolves to its port.
 */
let gcUs = 0;

async function cpuServer(extra?: (req: IncomingMessage, res: ServerResponse) => boolean) {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcUs += entry.duration * 1000;
  }).observe({ entryTypes: ['gc'] });
  const server = createHttpServer((req, res) => {
    if (extra?.(req, res)) return;
    const { user, system } = process.cpuUsage();
    const io = readFileSync('/proc/self/io', 'utf8');
    const field = (name: string): number => Number(new RegExp(`${name}: (\\d+)`).exec(io)?.[1]);
    res.end(JSON.stringify([user + system, field('syscr'), field('syscw'), gcUs]));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

// ---- children ----------------------------------------------------------------------------

async function serveEdge(): Promise<void> {
  const { info: address } = await startBenchEdge();
  const profiler = new Session();
  profiler.connect();
  const cpu = await cpuServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://edge');
    if (url.pathname === '/profile/start') {
      void profiler
        .post('Profiler.enable')
        .then(() => profiler.post('Profiler.start'))
        .then(() => res.end('started'));
      return true;
    }
    if (url.pathname === '/profile/stop') {
      void profiler.post('Profiler.stop').then(({ profile }) => {
        writeFileSync(url.searchParams.get('file')!, JSON.stringify(profile));
        res.end('written');
      });
      return true;
    }
    return false;
  });
  const info: EdgeInfo = { ...address, cpuPort: cpu };
  answer(info);
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connectAgent(spec.edge);
  const hosts: string[] = [];
  for (const c of CASES) {
    const endpoint = await session.httpEndpoint({
      scheme: 'http',
      forward: spec.service,
      ...(c.policy ? { trafficPolicy: c.policy } : {}),
    });
    hosts.push(new URL(endpoint.url!).hostname);
  }
  const agent: AgentInfo = { hosts, cpuPort: await cpuServer() };
  answer(agent);
}

// ---- coordination and report -------------------------------------------------------------

const roles = new RoleProcesses(import.meta.url);

/** A process's CPU time (µs), read and write system calls so far. */
type Usage = [cpuUs: number, reads: number, writes: number, gcUs: number];

async function usage(port: number): Promise<Usage> {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return (await res.json()) as Usage;
}

async function edgeProfiler(port: number, path: string): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  await res.text();
}

/** One load run against `host`, with the edge's CPU time per request it cost. */
let servicePid = 0;

/** CPU time (µs) process `pid` has used so far, from /proc (10 ms ticks). */
function processCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function measure(edge: EdgeInfo, agent: AgentInfo, host: string): Promise<Measured> {
  const before = await usage(edge.cpuPort);
  const agentBefore = await usage(agent.cpuPort);
  const serviceBefore = processCpuUs(servicePid);
  const serviceCalls = syscalls(servicePid);
  const load = await roles.start<RateResult>('load', { port: edge.httpPort, host });
  const serviceAfter = processCpuUs(servicePid);
  const otherCalls = syscalls(servicePid) - serviceCalls + (load.loadSyscalls ?? 0);
  const after = await usage(edge.cpuPort);
  const agentAfter = await usage(agent.cpuPort);
  const n = Math.max(1, load.total);
  return {
    ...load,
    cpuUs: (after[0] - before[0]) / n,
    syscalls: (after[1] - before[1] + after[2] - before[2]) / n,
    gcUs: (after[3] - before[3]) / n,
    agentCpuUs: (agentAfter[0] - agentBefore[0]) / n,
    otherCpuUs: (serviceAfter - serviceBefore + (load.loadCpuUs ?? 0)) / n,
    otherSyscalls: otherCalls / n,
  };
}

async function main(): Promise<void> {
  const edge = await roles.start<EdgeInfo>('edge');
  const serviceRole = await roles.spawn<{ http: number }>('service');
  const service = serviceRole.reply;
  servicePid = serviceRole.proc.pid!;
  const agent = await roles.start<AgentInfo>('agent', { edge, service: service.http });
  const hosts = agent.hosts;
  // Warm up each endpoint (JIT, the agent's stream pool) before measuring.
  for (const host of hosts) {
    await roles.start<RateResult>('load', { port: edge.httpPort, host, warmup: true });
  }
  const results = CASES.map(() => [] as Measured[]);
  for (let round = 0; round < ROUNDS; round++) {
    // Every other round runs the cases in reverse, so that none always follows the same one.
    for (let k = 0; k < CASES.length; k++) {
      const i = round % 2 === 0 ? k : CASES.length - 1 - k;
      results[i]!.push(await measure(edge, agent, hosts[i]!));
      process.stderr.write(`round ${round + 1}: ${CASES[i]!.name} done\n`);
    }
  }
  if (PROFILE_DIR) {
    for (let i = 0; i < CASES.length; i++) {
      const file = `${PROFILE_DIR}/${ALL_CASES.indexOf(CASES[i]!)}.cpuprofile`;
      await edgeProfiler(edge.cpuPort, '/profile/start');
      const run = await measure(edge, agent, hosts[i]!);
      await edgeProfiler(edge.cpuPort, `/profile/stop?file=${encodeURIComponent(file)}`);
      process.stderr.write(
        `profile of ${CASES[i]!.name}: ${file}, ${run.total} requests, ${fmt(run.cpuUs)} µs each\n`,
      );
    }
  }
  const baseRuns = results[0]!;
  const baseCpu = median(results[0]!.map((r) => r.cpuUs));
  const rows = CASES.map((c, i) => {
    const rs = results[i]!;
    const rps = median(rs.map((r) => r.rate));
    const cpuUs = median(rs.map((r) => r.cpuUs));
    return [
      c.name,
      fmt(rps),
      // Each round's ratio to the base case of the same round, then their median: a drift of
      // the machine between rounds cancels out.
      `${fmt(100 * median(rs.map((r, round) => r.rate / baseRuns[round]!.rate)), 1)} %`,
      `${fmt(median(rs.map((r) => r.p50)), 1)} / ${fmt(median(rs.map((r) => r.p99)), 1)}`,
      `${fmt(cpuUs)} (+${fmt(Math.max(0, cpuUs - baseCpu))})`,
      fmt(median(rs.map((r) => r.gcUs)), 1),
      fmt(median(rs.map((r) => r.syscalls)), 2),
      fmt(median(rs.map((r) => r.agentCpuUs))),
      fmt(median(rs.map((r) => r.otherCpuUs))),
      fmt(median(rs.map((r) => r.otherSyscalls)), 2),
      String(rs.reduce((n, r) => n + r.errors, 0)),
    ];
  });
  console.log(
    `\nPolicy cost through a tunnel, ${machine()}; ` +
      `${CONNECTIONS} keep-alive connections, ${DURATION} s per run, median of ${ROUNDS} interleaved rounds.\n`,
  );
  console.log(
    markdownTable(
      [
        'endpoint policy',
        'req/s',
        'vs no policy (median of rounds)',
        'p50 / p99 ms',
        'edge CPU µs/request (+ policy)',
        'edge GC µs/request',
        'edge syscalls/request',
        'agent CPU µs/request',
        'service + load generator CPU µs/request',
        'their syscalls/request',
        'errors',
      ],
      rows,
    ),
  );
}

runTunnelBench(roles, { main, serveEdge, serveAgent, connections: CONNECTIONS, seconds: DURATION });
