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
import type { AddressInfo } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { TEN_RULE_HTTP_POLICY } from '../test/support/policy-fixtures.js';
import { fmt, machine, markdownTable } from './report.js';
import { median, runTunnelBench, type RateResult } from './support/load.js';
import { answer, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

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

const CASES = [
  { name: 'no policy', policy: undefined },
  { name: 'IP allowlist (on_tcp_connect only)', policy: ALLOWLIST },
  { name: '3 rules (deny by header, add request and response headers)', policy: THREE_RULES },
  { name: 'circuit-breaker and url-rewrite', policy: REWRITE_BREAKER },
  { name: '10 rules (the test policy, all evaluated)', policy: TEN_RULE_HTTP_POLICY },
] as const;

interface EdgeInfo extends EdgeAddress {
  httpPort: number;
  /** Answers GET with the edge process's CPU time so far, in microseconds. */
  cpuPort: number;
}
interface Measured extends RateResult {
  /** Edge CPU time per request, microseconds. */
  cpuUs: number;
}

// ---- children ----------------------------------------------------------------------------

async function serveEdge(): Promise<void> {
  const { info: address } = await startBenchEdge();
  const cpu = createHttpServer((req, res) => {
    const { user, system } = process.cpuUsage();
    res.end(String(user + system));
  });
  await new Promise<void>((resolve) => cpu.listen(0, '127.0.0.1', resolve));
  const info: EdgeInfo = { ...address, cpuPort: (cpu.address() as AddressInfo).port };
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
  answer(hosts);
}

// ---- coordination and report -------------------------------------------------------------

const roles = new RoleProcesses(import.meta.url);

async function edgeCpuUs(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/`);
  return Number(await res.text());
}

/** One load run against `host`, with the edge's CPU time per request it cost. */
async function measure(edge: EdgeInfo, host: string): Promise<Measured> {
  const before = await edgeCpuUs(edge.cpuPort);
  const load = await roles.start<RateResult>('load', { port: edge.httpPort, host });
  const after = await edgeCpuUs(edge.cpuPort);
  return { ...load, cpuUs: (after - before) / Math.max(1, load.total) };
}

async function main(): Promise<void> {
  const edge = await roles.start<EdgeInfo>('edge');
  const service = await roles.start<{ http: number }>('service');
  const hosts = await roles.start<string[]>('agent', { edge, service: service.http });
  // Warm up each endpoint (JIT, the agent's stream pool) before measuring.
  for (const host of hosts) {
    await roles.start<RateResult>('load', { port: edge.httpPort, host, warmup: true });
  }
  const results = CASES.map(() => [] as Measured[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < CASES.length; i++) {
      results[i]!.push(await measure(edge, hosts[i]!));
      process.stderr.write(`round ${round + 1}: ${CASES[i]!.name} done\n`);
    }
  }
  const base = median(results[0]!.map((r) => r.rate));
  const baseCpu = median(results[0]!.map((r) => r.cpuUs));
  const rows = CASES.map((c, i) => {
    const rs = results[i]!;
    const rps = median(rs.map((r) => r.rate));
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
  console.log(
    `\nPolicy cost through a tunnel, ${machine()}; ` +
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

runTunnelBench(roles, { main, serveEdge, serveAgent, connections: CONNECTIONS, seconds: DURATION });
