/**
 * The cost of a traffic policy on requests per second through a whole tunnel: public client ->
 * edge ingress -> agent session -> Burrow SDK -> local service, for three endpoints of one agent
 * in the same run: no policy, a typical three-rule policy (deny by header, add a request header,
 * add a response header), and the ten-rule policy of the tests (every rule evaluated, nothing
 * refused). Keep-alive HTTP with autocannon; the rounds are interleaved so drift hits every case.
 *
 *   node --import tsx bench/policy-tunnel.ts
 *   DURATION=5 CONNECTIONS=50 ROUNDS=3 node --import tsx bench/policy-tunnel.ts
 *
 * Five processes, each with its own event loop as in production: the edge (agent listener,
 * ingress, SQLite store), the SDK agent, the local service, the load generator (one per
 * measurement) and this process, which only coordinates. Besides requests per second, the edge
 * process's CPU time per request is reported: it is what a policy adds, and it varies much less
 * than throughput when other work shares the machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { connect } from '../src/sdk/index.js';
import { TEN_RULE_HTTP_POLICY } from '../src/test-support/policy-fixtures.js';
import { startSdkTestEdge } from '../src/test-support/sdk-edge.js';
import { fmt, markdownTable } from './report.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const THREE_RULES = `
on_http_request:
  - expressions: ["'x-block' in req.headers"]
    actions: [{type: deny}]
  - actions: [{type: add-headers, config: {headers: {x-client-ip: "\${conn.client_ip}"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-served-by: burrow}}}]
`;

const CASES = [
  { name: 'no policy', policy: undefined },
  { name: '3 rules (deny by header, add request and response headers)', policy: THREE_RULES },
  { name: '10 rules (the test policy, all evaluated)', policy: TEN_RULE_HTTP_POLICY },
] as const;

interface EdgeInfo {
  serverAddr: string;
  caFile: string;
  httpPort: number;
  token: string;
  /** Answers GET with the edge process's CPU time so far, in microseconds. */
  cpuPort: number;
}
interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
}
interface Measured extends LoadResult {
  /** Edge CPU time per request, microseconds. */
  cpuUs: number;
}

// ---- children ----------------------------------------------------------------------------

async function serveEdge(): Promise<void> {
  const edge = await startSdkTestEdge('sqlite');
  const cpu = createHttpServer((req, res) => {
    const { user, system } = process.cpuUsage();
    res.end(String(user + system));
  });
  await new Promise<void>((resolve) => cpu.listen(0, '127.0.0.1', resolve));
  const info: EdgeInfo = {
    serverAddr: edge.serverAddr,
    caFile: edge.caFile,
    httpPort: edge.httpPort,
    token: await edge.token(),
    cpuPort: (cpu.address() as AddressInfo).port,
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
  process.on('SIGTERM', () => void edge.close().then(() => process.exit(0)));
}

function serveService(): void {
  const server = createHttpServer((req, res) => res.end('hello world\n'));
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connect({
    serverAddr: spec.edge.serverAddr,
    authtoken: spec.edge.token,
    ca: spec.edge.caFile,
  });
  const hosts: string[] = [];
  for (const c of CASES) {
    const endpoint = await session.httpEndpoint({
      scheme: 'http',
      forward: spec.service,
      ...(c.policy ? { trafficPolicy: c.policy } : {}),
    });
    hosts.push(new URL(endpoint.url!).hostname);
  }
  process.stdout.write(`${JSON.stringify(hosts)}\n`);
}

async function runLoad(spec: { port: number; host: string }): Promise<LoadResult> {
  const r = await autocannon({
    url: `http://127.0.0.1:${spec.port}/`,
    headers: { host: spec.host },
    connections: CONNECTIONS,
    duration: DURATION,
  });
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    requests: r.requests.total,
  };
}

// ---- coordination and report -------------------------------------------------------------

const children: ChildProcess[] = [];

async function child<T>(role: string, arg?: unknown): Promise<T> {
  const self = fileURLToPath(import.meta.url);
  const args = ['--import', 'tsx', self, role, ...(arg === undefined ? [] : [JSON.stringify(arg)])];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(proc);
  let out = '';
  proc.stdout.setEncoding('utf8');
  for await (const chunk of proc.stdout) {
    out += chunk as string;
    if (out.endsWith('\n')) break;
  }
  return JSON.parse(out) as T;
}

async function edgeCpuUs(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return Number(await res.text());
}

/** One load run against `host`, with the edge's CPU time per request it cost. */
async function measure(edge: EdgeInfo, host: string): Promise<Measured> {
  const before = await edgeCpuUs(edge.cpuPort);
  const load = await child<LoadResult>('load', { port: edge.httpPort, host });
  const after = await edgeCpuUs(edge.cpuPort);
  return { ...load, cpuUs: (after - before) / Math.max(1, load.requests) };
}

const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const edge = await child<EdgeInfo>('edge');
  const service = await child<{ port: number }>('service');
  const hosts = await child<string[]>('agent', { edge, service: service.port });
  // Warm up each endpoint (JIT, the agent's stream pool) before measuring.
  for (const host of hosts) {
    await child<LoadResult>('load', { port: edge.httpPort, host, warmup: true });
  }
  const results = CASES.map(() => [] as Measured[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < CASES.length; i++) {
      results[i]!.push(await measure(edge, hosts[i]!));
      process.stderr.write(`round ${round + 1}: ${CASES[i]!.name} done\n`);
    }
  }
  const base = median(results[0]!.map((r) => r.rps));
  const baseCpu = median(results[0]!.map((r) => r.cpuUs));
  const rows = CASES.map((c, i) => {
    const rs = results[i]!;
    const rps = median(rs.map((r) => r.rps));
    const cpuUs = median(rs.map((r) => r.cpuUs));
    return [
      c.name,
      fmt(rps),
      `${fmt((100 * rps) / base, 1)} %`,
      `${fmt(median(rs.map((r) => r.p50)), 1)} / ${fmt(median(rs.map((r) => r.p99)), 1)}`,
      `${fmt(cpuUs)} (+${fmt(Math.max(0, cpuUs - baseCpu))})`,
      String(rs.reduce((n, r) => n + r.errors, 0)),
    ];
  });
  const cpu = cpus();
  console.log(
    `\nPolicy cost through a tunnel, Node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}; ` +
      `${CONNECTIONS} keep-alive connections, ${DURATION} s per run, median of ${ROUNDS} interleaved rounds.\n`,
  );
  console.log(
    markdownTable(
      [
        'endpoint policy',
        'req/s',
        'vs no policy',
        'p50 / p99 ms',
        'edge CPU µs/request (+ policy)',
        'errors',
      ],
      rows,
    ),
  );
}

function shutdown(code: number): void {
  for (const c of children) c.kill('SIGTERM');
  process.exit(code);
}

const role = process.argv[2];
const arg = process.argv[3] ? (JSON.parse(process.argv[3]) as unknown) : undefined;
const fail = (err: unknown): void => {
  console.error(err);
  process.exit(1);
};
if (role === 'edge') {
  serveEdge().catch(fail);
} else if (role === 'service') {
  serveService();
} else if (role === 'agent') {
  serveAgent(arg as { edge: EdgeInfo; service: number }).catch(fail);
} else if (role === 'load') {
  const spec = arg as { port: number; host: string; warmup?: boolean };
  const run = spec.warmup
    ? autocannon({
        url: `http://127.0.0.1:${spec.port}/`,
        headers: { host: spec.host },
        connections: CONNECTIONS,
        duration: 1,
      }).then(() => ({ rps: 0, p50: 0, p99: 0, errors: 0, requests: 0 }))
    : runLoad(spec);
  run.then((result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exit(0);
  }, fail);
} else {
  main().then(
    () => shutdown(0),
    (err: unknown) => {
      console.error(err);
      shutdown(1);
    },
  );
}
