/** Load generation shared by the benchmarks: closed-loop workers, keep-alive HTTP, best-of runs. */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { fmt, markdownTable, percentile } from '../report.js';
import { startBulkService } from './bulk.js';
import { answer, runRoles, type RoleProcesses } from './roles.js';

/** Rate and latency of a load run. */
export interface RateResult {
  /** Completed operations per second. */
  rate: number;
  p50: number;
  p99: number;
  errors: number;
  /** Completed operations in all. */
  total: number;
  /** The load generator's own CPU time during the run, µs (the `load` role measures it). */
  loadCpuUs?: number | undefined;
  /** The load generator's read and write system calls during the run (the `load` role's). */
  loadSyscalls?: number | undefined;
}

/**
 * `workers` loops each running `operation` back to back for `seconds`; rate and latency (ms).
 * @example const r = await closedLoop(5, 20, () => tcpPing(port));
 */
export async function closedLoop(
  seconds: number,
  workers: number,
  operation: () => Promise<unknown>,
): Promise<RateResult> {
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + seconds * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const started = performance.now();
      try {
        await operation();
        latencies.push(performance.now() - started);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  latencies.sort((a, b) => a - b);
  return {
    rate: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
    total: latencies.length,
  };
}

/**
 * Keep-alive HTTP GETs of `/` (autocannon) against `ip` (127.0.0.1 by default):`port` with
 * `Host: host` and any other `headers`; `method` and `body` to send something else.
 * @example const r = await keepAliveLoad({ port, host, connections: 50, seconds: 5 });
 */
export async function keepAliveLoad(spec: {
  ip?: string | undefined;
  port: number;
  host: string;
  headers?: Record<string, string> | undefined;
  method?: 'GET' | 'POST' | undefined;
  body?: string | undefined;
  connections: number;
  seconds: number;
}): Promise<RateResult> {
  const r = await autocannon({
    url: `http://${spec.ip ?? '127.0.0.1'}:${spec.port}/`,
    headers: { host: spec.host, ...spec.headers },
    ...(spec.method ? { method: spec.method } : {}),
    ...(spec.body !== undefined ? { body: spec.body } : {}),
    connections: spec.connections,
    duration: spec.seconds,
  });
  return {
    // Requests over the time taken: the average of per-second samples drops a partial second.
    rate: r.requests.total / (r.duration || spec.seconds),
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    total: r.requests.total,
  };
}

/** Read and write system calls process `pid` made so far (/proc/<pid>/io: syscr, syscw). */
export function ioCalls(pid: number | 'self' = 'self'): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string): number =>
    Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1]);
  return { reads: field('syscr'), writes: field('syscw') };
}

/** {@link ioCalls}, reads and writes together. */
export function syscalls(pid: number | 'self' = 'self'): number {
  const { reads, writes } = ioCalls(pid);
  return reads + writes;
}

/** What the `load` role is asked to run (see keepAliveLoadRole). */
export interface LoadRoleSpec {
  ip?: string | undefined;
  port: number;
  host: string;
  headers?: Record<string, string> | undefined;
  method?: 'GET' | 'POST' | undefined;
  body?: string | undefined;
  /** A warm-up run: one second, its figures not used. */
  warmup?: boolean | undefined;
  /** Overrides the role's `seconds`. */
  seconds?: number | undefined;
}

/**
 * The `load` role of a tunnel benchmark: `keepAliveLoad` on the spec it is given for `seconds`
 * (one second for a warm-up run, whose figures are not used), then answer with the result and exit.
 * @example runRoles(roles, { main, load: keepAliveLoadRole(CONNECTIONS, DURATION) });
 */
export function keepAliveLoadRole(
  connections: number,
  seconds: number,
): (arg: unknown) => Promise<void> {
  return async (arg) => {
    const spec = arg as LoadRoleSpec;
    const cpu = process.cpuUsage();
    const calls = syscalls();
    const result = await keepAliveLoad({
      ...spec,
      connections,
      seconds: spec.warmup ? 1 : (spec.seconds ?? seconds),
    });
    const used = process.cpuUsage(cpu);
    answer({ ...result, loadCpuUs: used.user + used.system, loadSyscalls: syscalls() - calls });
    process.exit(0);
  };
}

/**
 * The largest of `runs` results of `measure`, by `value` (the number itself by default).
 * @example const mibPerS = await bestOf(3, () => tcpBulk(port, 'up', bytes));
 */
export async function bestOf<T>(
  runs: number,
  measure: () => Promise<T>,
  value: (result: T) => number = (result) => result as number,
): Promise<T> {
  let best: T | undefined;
  for (let i = 0; i < Math.max(1, runs); i++) {
    const result = await measure();
    if (best === undefined || value(result) > value(best)) best = result;
  }
  return best!;
}

/** The median of `values` (of an even count, the mean of the middle two). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The roles of a benchmark through a tunnel, run with `runRoles`: `edge`, `service` (the bulk
 * service), `agent` (told the edge's answer and the service's HTTP port), `load` (keep-alive load
 * on one host, see `keepAliveLoadRole`) and `main`, the parent.
 * @example runTunnelBench(roles, { main, serveEdge, serveAgent, connections: 50, seconds: 5 });
 */
export function runTunnelBench<Edge>(
  roles: RoleProcesses,
  bench: {
    main: () => Promise<void>;
    serveEdge: () => Promise<void>;
    serveAgent: (spec: { edge: Edge; service: number }) => Promise<void>;
    connections: number;
    seconds: number;
  },
): void {
  runRoles(roles, {
    main: bench.main,
    edge: bench.serveEdge,
    service: () => startBulkService().then(answer),
    agent: (arg) => bench.serveAgent(arg as { edge: Edge; service: number }),
    load: keepAliveLoadRole(bench.connections, bench.seconds),
  });
}

/**
 * Keep-alive load on each of `hosts` through the ingress port `port` (the `load` role): a warm-up
 * run each (JIT, the agents' stream pools), then `rounds` rounds of one run per host, interleaved
 * so drift hits every route alike (progress on stderr). Returns the Markdown table of each
 * route's median req/s, its ratio to the first route's, median p50 / p99 and errors in all.
 * @example console.log(await compareRoutes(roles, { port: edge.httpPort, hosts, names, rounds: 3 }));
 */
export async function compareRoutes(
  roles: RoleProcesses,
  spec: { port: number; hosts: readonly string[]; names: readonly string[]; rounds: number },
): Promise<string> {
  const { port, hosts, names } = spec;
  for (const host of hosts) await roles.start<RateResult>('load', { port, host, warmup: true });
  const results = hosts.map(() => [] as RateResult[]);
  for (let round = 0; round < spec.rounds; round++) {
    for (let i = 0; i < hosts.length; i++) {
      results[i]!.push(await roles.start<RateResult>('load', { port, host: hosts[i] }));
      process.stderr.write(`round ${round + 1}: ${names[i]} done\n`);
    }
  }
  const base = median(results[0]!.map((r) => r.rate));
  const rows = names.map((name, i) => {
    const rs = results[i]!;
    const rps = median(rs.map((r) => r.rate));
    return [
      name,
      fmt(rps),
      fmt(rps / base, 2),
      `${fmt(median(rs.map((r) => r.p50)), 1)} / ${fmt(median(rs.map((r) => r.p99)), 1)}`,
      String(rs.reduce((n, r) => n + r.errors, 0)),
    ];
  });
  return markdownTable(['route', 'req/s', 'ratio', 'p50 / p99 ms', 'errors'], rows);
}
