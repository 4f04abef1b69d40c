/**
 * Several nodes on one PostgreSQL (issue 15): keep-alive HTTP requests per second to a tunnel held
 * by node A, reached at A's own ingress and at node B's, which relays each connection over the
 * node link (mutual TLS, one muxado session per pair of nodes) to A, against the local service
 * reached directly. One run, interleaved rounds (A, B, direct, ...), so drift hits every path
 * alike. Target: B / A >= 0.7.
 *
 *   npm run build && npm run bench:cluster
 *   RUNS=3 DURATION=5 CONNECTIONS=50 npm run bench:cluster
 *   PROFILE=1 ONLY=b npm run bench:cluster    # + CPU profiles of both nodes while measured
 *
 * Processes, each with its own event loop: PostgreSQL, two `burrow server --role all` nodes (the
 * compiled CLI, `--log-level warn`) on 127.0.0.2 (A) and 127.0.0.3 (B) with the same port numbers,
 * the local service (a child), the Burrow SDK agent connected to A (a child), one autocannon load
 * generator per measurement (a child) and this process, which only coordinates. CPU time of every
 * process but the load generator is read from /proc around each measurement.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from '../test/support/server-process.js';
import { until } from '../test/support/mux.js';
import { createTestDatabase, type TestDatabase } from '../test/support/stores.js';
import { formatSummary, summarizeProfile } from './cpu-profile.js';
import { createAuthtoken, processCpuMs } from './edge-process.js';
import { fmt, machine, markdownTable } from './report.js';
import { startBulkService, type ServicePorts } from './support/bulk.js';
import { keepAliveLoadRole, median, type RateResult } from './support/load.js';
import { answer, RoleProcesses, runRoles } from './support/roles.js';
import { connectAgent, type EdgeAddress } from './support/sdk-agent.js';

const RUNS = Number(process.env.RUNS ?? 3);
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const PROFILE = process.env.PROFILE === '1';
const TARGET = 0.7;

/**
 * Loaded into each node with PROFILE=1: the first SIGUSR2 starts V8's CPU profiler, the second
 * writes the profile to $BENCH_CPU_PROFILE, so that it covers the measured rounds only.
 */
const PROFILE_ON_SIGNAL =
  'data:text/javascript,' +
  encodeURIComponent(
    "import { Session } from 'node:inspector'; import { writeFileSync } from 'node:fs';" +
      'const s = new Session(); s.connect(); let on = false;' +
      "process.on('SIGUSR2', () => { if (!on) { s.post('Profiler.enable');" +
      " s.post('Profiler.start'); on = true; return; }" +
      " s.post('Profiler.stop', (err, r) => { on = false;" +
      ' if (!err) writeFileSync(process.env.BENCH_CPU_PROFILE, JSON.stringify(r.profile)); }); });',
  );

const NODES = { a: '127.0.0.2', b: '127.0.0.3' } as const;
type NodeName = keyof typeof NODES;
type Path = 'a' | 'b' | 'direct';
const PATHS: Path[] = ['a', 'b', 'direct'];
/** Comma-separated paths to measure (a,b,direct); all by default. */
const ONLY = (process.env.ONLY?.split(',') as Path[] | undefined) ?? PATHS;
const PATH_NAMES: Record<Path, string> = {
  a: 'node A ingress (holds the tunnel)',
  b: 'node B ingress → node link → A',
  direct: 'direct to the service',
};

// ---- children: the SDK agent and the load generator -------------------------------------------

async function serveAgent(spec: { edge: EdgeAddress; service: number }): Promise<void> {
  const session = await connectAgent(spec.edge);
  const web = await session.httpEndpoint({ scheme: 'http', forward: spec.service });
  answer({ host: new URL(web.url!).hostname });
}

interface LoadSpec {
  ip: string;
  port: number;
  host: string;
  seconds: number;
}

// ---- the cluster and the report (this process) ------------------------------------------------

const roles = new RoleProcesses(import.meta.url);

interface Cluster {
  db: TestDatabase;
  nodes: Partial<Record<NodeName, BurrowServer>>;
  /** Where each node writes its CPU profile (PROFILE=1). */
  profiles: Partial<Record<NodeName, string>>;
}

const cluster: Cluster = { db: undefined!, nodes: {}, profiles: {} };
let cleaned: Promise<void> | undefined;

/** Stop every child and node, then drop the database; safe to call more than once. */
function cleanUp(): Promise<void> {
  cleaned ??= (async () => {
    roles.killAll('SIGKILL');
    await Promise.all(Object.values(cluster.nodes).map((n) => n.stop(20_000)));
    await cluster.db?.drop();
  })();
  return cleaned;
}

async function startNode(name: NodeName, ports: Record<'agent' | 'http' | 'https', number>) {
  const ip = NODES[name];
  const dataDir = join(cluster.db.dataDir, name);
  mkdirSync(dataDir, { recursive: true });
  const saved = { options: process.env.NODE_OPTIONS, file: process.env.BENCH_CPU_PROFILE };
  if (PROFILE) {
    // `--cpu-prof` is not allowed in NODE_OPTIONS, and startBurrowServer takes no node flags;
    // `--import` is, and startBurrowServer passes this process's environment on (not BURROW_*).
    const file = join(cluster.db.dataDir, `node-${name}.cpuprofile`);
    cluster.profiles[name] = file;
    process.env.NODE_OPTIONS = `${saved.options ?? ''} --import ${PROFILE_ON_SIGNAL}`.trim();
    process.env.BENCH_CPU_PROFILE = file;
  }
  try {
    cluster.nodes[name] = await startBurrowServer(
      { dataDir, database: cluster.db.database },
      {
        // --log-level warn silences the "API listening" line: wait for /healthz instead.
        discardLogs: true,
        args: [
          ...['--role', 'all', '--log-level', 'warn', '--node-id', `node-${name}`],
          ...['--node-listen', `${ip}:0`, '--agent-listen', `${ip}:${ports.agent}`],
          ...['--http-listen', `${ip}:${ports.http}`, '--https-listen', `${ip}:${ports.https}`],
        ],
      },
    );
  } finally {
    for (const [key, value] of [
      ['NODE_OPTIONS', saved.options],
      ['BENCH_CPU_PROFILE', saved.file],
    ] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
  return cluster.nodes[name];
}

/** The status of `GET /` with `Host: host` at ip:port (0 if it failed). */
function statusOf(ip: string, port: number, host: string): Promise<number> {
  return new Promise((resolve) => {
    // fetch() would not send our Host header; node:http does.
    const req = request({ host: ip, port, path: '/', headers: { host }, agent: false }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', () => resolve(0));
    req.end();
  });
}

/** Resolves once `GET /` at ip:port answers 200 (B learns of A's tunnel through the store). */
async function untilServed(ip: string, port: number, host: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  let status = 0;
  while ((status = await statusOf(ip, port, host)) !== 200) {
    if (Date.now() > deadline) {
      throw new Error(`${host} not served at ${ip}:${port} in ${ms} ms (last status ${status})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Measured {
  result: RateResult;
  /** CPU ms per process over the measurement. */
  cpu: Record<string, number>;
}

async function main(): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  }
  try {
    await measureAll();
  } finally {
    await cleanUp();
  }
}

async function measureAll(): Promise<void> {
  const load = loadavg()[0]!.toFixed(1);
  cluster.db = await createTestDatabase('postgres');
  const ports = { agent: await freePort(), http: await freePort(), https: await freePort() };
  const a = await startNode('a', ports);
  const b = await startNode('b', ports);
  const apiKey = await createApiKey({
    dataDir: join(cluster.db.dataDir, 'a'),
    database: cluster.db.database,
  });
  const { reply: service, proc: serviceProc } = await roles.spawn<ServicePorts>('service');
  const edge: EdgeAddress = {
    serverAddr: `${NODES.a}:${ports.agent}`,
    caFile: join(cluster.db.dataDir, 'a', 'ca.pem'),
    token: await createAuthtoken(a.url, apiKey),
  };
  const { reply: agent, proc: agentProc } = await roles.spawn<{ host: string }>('agent', {
    edge,
    service: service.http,
  });
  await untilServed(NODES.a, ports.http, agent.host, 5000);
  await untilServed(NODES.b, ports.http, agent.host, 10_000);

  const targets: Record<Path, Omit<LoadSpec, 'seconds'>> = {
    a: { ip: NODES.a, port: ports.http, host: agent.host },
    b: { ip: NODES.b, port: ports.http, host: agent.host },
    direct: { ip: '127.0.0.1', port: service.http, host: 'localhost' },
  };
  const pids: Record<string, number> = {
    'node A': a.process.pid!,
    'node B': b.process.pid!,
    agent: agentProc.pid!,
    service: serviceProc.pid!,
  };
  const measure = async (path: Path, seconds: number): Promise<Measured> => {
    const before = Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid)]),
    );
    const result = await roles.start<RateResult>('load', { ...targets[path], seconds });
    const cpu = Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid) - before[k]!]),
    );
    if (result.errors > 0) process.stderr.write(`${path}: ${result.errors} errors\n`);
    return { result, cpu };
  };

  const paths = PATHS.filter((p) => ONLY.includes(p));
  // Warm up every path (JIT, pooled tunnel streams, the node link) before anything is measured.
  for (const path of paths) await measure(path, 1);
  const runs: Record<Path, Measured[]> = { a: [], b: [], direct: [] };
  const nodeProcesses = Object.values(cluster.nodes).map((n) => n.process);
  if (PROFILE) for (const node of nodeProcesses) node.kill('SIGUSR2');
  for (let run = 0; run < RUNS; run++) {
    for (const path of paths) {
      runs[path].push(await measure(path, DURATION));
      process.stderr.write(
        `run ${run + 1}: ${path} ${fmt(runs[path].at(-1)!.result.rate)} req/s\n`,
      );
    }
  }
  if (PROFILE) for (const node of nodeProcesses) node.kill('SIGUSR2');

  const rate = (p: Path) => median(runs[p].map((m) => m.result.rate));
  const perRequestUs = (p: Path, proc: string) =>
    median(runs[p].map((m) => (1000 * m.cpu[proc]!) / Math.max(1, m.result.total)));
  const cpuCell = (p: Path, proc: string) => {
    // A process with (almost) nothing to do on a path: the column says so rather than noise.
    const us = perRequestUs(p, proc);
    return us < 1 ? '-' : fmt(us, 1);
  };
  const rows = paths.map((p) => [
    PATH_NAMES[p],
    fmt(rate(p)),
    `${fmt(median(runs[p].map((m) => m.result.p50)), 1)} / ${fmt(median(runs[p].map((m) => m.result.p99)), 1)}`,
    ...Object.keys(pids).map((proc) => cpuCell(p, proc)),
    String(runs[p].reduce((n, m) => n + m.result.errors, 0)),
  ]);
  console.log(
    `\nCluster throughput, ${machine()}; load average ${load} at the start; ` +
      `${CONNECTIONS} keep-alive connections, ${DURATION} s per run, ` +
      `median of ${RUNS} interleaved rounds.\n`,
  );
  console.log(
    markdownTable(
      [
        'path',
        'req/s',
        'p50 / p99 ms',
        ...Object.keys(pids).map((proc) => `${proc} CPU µs/req`),
        'errors',
      ],
      rows,
    ),
  );
  // Rounds pair the paths in time, so the ratio of each round is the figure; its median is the
  // headline, the ratio of the median rates is shown beside it.
  const roundRatios = (p: Path, q: Path) =>
    runs[p].map((m, i) => m.result.rate / (runs[q][i]?.result.rate ?? NaN));
  const ratio = (p: Path, q: Path) => median(roundRatios(p, q));
  const ratioLine = (p: Path, q: Path) =>
    `${fmt(ratio(p, q), 2)} median of rounds (${roundRatios(p, q)
      .map((x) => fmt(x, 2))
      .join(', ')}); ratio of median rates ${fmt(rate(p) / rate(q), 2)}`;
  /** CPU µs per request of every measured process together (not the load generator). */
  const cpuPerRequest = (p: Path) =>
    Object.keys(pids).reduce((sum, proc) => sum + perRequestUs(p, proc), 0);
  console.log('');
  if (paths.includes('a') && paths.includes('b')) {
    const verdict = ratio('b', 'a') >= TARGET ? 'met' : 'missed';
    console.log(`B / A: ${ratioLine('b', 'a')}; target >= ${TARGET}: ${verdict}`);
    console.log(
      `CPU per request, nodes + agent + service: via A ${fmt(cpuPerRequest('a'), 1)} µs, ` +
        `via B ${fmt(cpuPerRequest('b'), 1)} µs (the hop adds ` +
        `${fmt(cpuPerRequest('b') - cpuPerRequest('a'), 1)} µs; CPU-bound B / A ` +
        `${fmt(cpuPerRequest('a') / cpuPerRequest('b'), 2)})`,
    );
  }
  if (paths.includes('a') && paths.includes('direct')) {
    console.log(`A / direct: ${ratioLine('a', 'direct')}`);
  }
  if (paths.includes('b') && paths.includes('direct')) {
    console.log(`B / direct: ${ratioLine('b', 'direct')}`);
  }

  if (PROFILE) {
    for (const name of ['a', 'b'] as const) {
      const file = cluster.profiles[name]!;
      await until(() => existsSync(file), 10_000);
      console.log(`\nCPU profile of node ${name.toUpperCase()} over the measured rounds:\n`);
      console.log(formatSummary(summarizeProfile(file, 25)));
    }
  }
}

runRoles(roles, {
  main,
  service: () => startBulkService().then(answer),
  agent: (arg) => serveAgent(arg as { edge: EdgeAddress; service: number }),
  load: keepAliveLoadRole(CONNECTIONS, DURATION),
});
