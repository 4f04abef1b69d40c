/**
 * End-to-end tunnel benchmark: the same local service measured directly and through a real
 * `burrow server` process (ingress -> agent session over TLS -> agent -> service), in one run,
 * with the unmodified @ngrok/ngrok package as the agent and with Burrow's own SDK.
 *
 *   npm run build && node --import tsx bench/tunnel-throughput.ts
 *   DURATION=5 CONNECTIONS=50 HTTP_MB=100 TCP_MB=512 RUNS=3 node --import tsx bench/tunnel-throughput.ts
 *   AGENTS=sdk ONLY=keepalive,tcp-up node --import tsx bench/tunnel-throughput.ts
 *   PROFILE=1 AGENTS=ngrok ONLY=keepalive node --import tsx bench/tunnel-throughput.ts
 *   MEMORY=0 ONLY=download node --import tsx bench/tunnel-throughput.ts   # no forced GCs
 *
 * Processes, each with its own event loop: the service (child), the burrow server (child), one
 * child per agent, and the public clients: wrk for request rates and latency, curl for the HTTP
 * transfers, this process for TCP bulk. CPU time of the server, agent and service is read from
 * /proc around every measurement; the server's memory after a forced full GC (SIGUSR2, see
 * bench/edge-process.ts) before the load, after it, and once it has been idle for a while.
 * PROFILE=1 runs the server under `node --cpu-prof` and prints where its time went.
 *
 * Latency (issue 29): keep-alive requests from one connection (`keepalive-1`: nothing queued, so
 * the time is the tunnel's) and from CONNECTIONS; for each, wrk's p50 and p99 through the tunnel
 * less the service's own in the same run ("latency added by the tunnel").
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatSummary, summarizeProfile } from './cpu-profile.js';
import { processCpuMs, startEdgeServer, type EdgeServer } from './edge-process.js';
import { fmt, machine, markdownTable, memoryRow, mib } from './report.js';
import { MIB, startBulkService, tcpBulk, type ServicePorts } from './support/bulk.js';
import { bestOf } from './support/load.js';
import { answer, exitOnSignals, fail, RoleProcesses } from './support/roles.js';
import { connectAgent, edgeAddress, type EdgeAddress } from './support/sdk-agent.js';
import { connectNgrok } from './support/ngrok-agent.js';
import { wrk } from './support/wrk.js';

const MB = 1_000_000;
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const NEWCONN_CONNECTIONS = Number(process.env.NEWCONN_CONNECTIONS ?? 10);
const HTTP_MB = Number(process.env.HTTP_MB ?? 100);
const TCP_MB = Number(process.env.TCP_MB ?? 512);
const RUNS = Number(process.env.RUNS ?? 3);
const AGENTS = (process.env.AGENTS ?? 'ngrok,sdk').split(',') as AgentKind[];
/** Comma-separated cases (keepalive-1,keepalive,newconn,download,upload,tcp-up,tcp-down). */
const ONLY = process.env.ONLY?.split(',');
const PROFILE = process.env.PROFILE === '1';
/**
 * MEMORY=0: no memory table. Its snapshots force full GCs in the server, and the one taken before
 * the load changes what the bulk cases measure: V8 then sets the old generation's limit close to
 * the live heap, and a bulk transfer's stream of read buffers (external memory) keeps reaching it,
 * so the server runs a full mark-compact every 100-200 ms for the rest of the run, where it ran
 * none without (docs/benchmarks.md, issue 29's sixth session).
 */
const MEMORY = process.env.MEMORY !== '0';

type AgentKind = 'ngrok' | 'sdk';
interface AgentUrls {
  pid: number;
  http: string;
  tcp: string;
}

// ---- the agents (children) --------------------------------------------------------------------

interface AgentSpec extends EdgeAddress {
  service: ServicePorts;
}

async function serveNgrok(spec: AgentSpec): Promise<void> {
  const session = await connectNgrok(spec);
  const web = await session
    .httpEndpoint()
    .scheme('HTTP')
    .listenAndForward(`http://127.0.0.1:${spec.service.http}`);
  const tcp = await session.tcpEndpoint().listenAndForward(`tcp://127.0.0.1:${spec.service.tcp}`);
  // ngrok's native session holds no handle on Node's event loop; keep the process alive.
  setInterval(() => undefined, 60_000);
  answer({ pid: process.pid, http: web.url(), tcp: tcp.url() });
}

async function serveSdk(spec: AgentSpec): Promise<void> {
  const session = await connectAgent(spec);
  const web = await session.httpEndpoint({ scheme: 'http', forward: spec.service.http });
  const tcp = await session.tcpEndpoint({ forward: spec.service.tcp });
  answer({ pid: process.pid, http: web.url, tcp: tcp.url });
}

// ---- the public clients (this process, wrk, curl) -------------------------------------------------

const roles = new RoleProcesses(import.meta.url);

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { maxBuffer: 16 * 1024 * 1024 }, (err, out, errOut) =>
      err ? reject(new Error(`${cmd}: ${err.message} ${errOut}`)) : resolve(out),
    ),
  );
}

interface Result {
  /** req/s or MB/s */
  value: number;
  p50Ms?: number;
  p99Ms?: number;
  errors?: number;
  /** What was moved: requests or bytes, for CPU cost per unit. */
  units: number;
}

/** `wrk` for DURATION: keep-alive, or with `close` a new connection per request. */
async function wrkRun(port: number, host: string, close: boolean, connections?: number) {
  const r = await wrk({
    port,
    host,
    connections: connections ?? (close ? NEWCONN_CONNECTIONS : CONNECTIONS),
    seconds: DURATION,
    close,
  });
  return { value: r.rate, p50Ms: r.p50Ms, p99Ms: r.p99Ms, errors: r.errors, units: r.requests };
}

async function curlTransfer(port: number, host: string, upload: string | undefined) {
  const url = `http://127.0.0.1:${port}${upload ? '/upload' : `/download?bytes=${HTTP_MB * MB}`}`;
  const args = ['-s', '-o', '/dev/null', '-H', `Host: ${host}`, '-w', '%{time_total}'];
  if (upload) args.push('-X', 'POST', '-T', upload, '-H', 'Expect:');
  const seconds = Number(await run('curl', [...args, url]));
  return { value: HTTP_MB / seconds, units: HTTP_MB * MB };
}

async function tunnelTcpBulk(port: number, direction: 'up' | 'down') {
  const mibPerS = await tcpBulk(port, direction, TCP_MB * MB);
  return { value: (mibPerS * MIB) / MB, units: TCP_MB * MB };
}

const bestTransfer = (measure: () => Promise<Result>) => bestOf(RUNS, measure, (r) => r.value);

// ---- the report (this process) -------------------------------------------------------------------

type CaseKind =
  'keepalive-1' | 'keepalive' | 'newconn' | 'download' | 'upload' | 'tcp-up' | 'tcp-down';
interface Target {
  httpPort: number;
  host: string;
  tcpPort: number;
}

const CASES: { kind: CaseKind; name: string; unit: string }[] = [
  // One client, one request at a time: the latency the tunnel adds, with nothing queued.
  { kind: 'keepalive-1', name: 'HTTP keep-alive, 12-byte responses, 1 conn', unit: 'req/s' },
  {
    kind: 'keepalive',
    name: `HTTP keep-alive, 12-byte responses, ${CONNECTIONS} conns`,
    unit: 'req/s',
  },
  {
    kind: 'newconn',
    name: `HTTP new connection per request, ${NEWCONN_CONNECTIONS} conns`,
    unit: 'req/s',
  },
  { kind: 'download', name: `HTTP ${HTTP_MB} MB download (curl)`, unit: 'MB/s' },
  { kind: 'upload', name: `HTTP ${HTTP_MB} MB upload (curl)`, unit: 'MB/s' },
  { kind: 'tcp-up', name: `TCP bulk ${TCP_MB} MB, client to service`, unit: 'MB/s' },
  { kind: 'tcp-down', name: `TCP bulk ${TCP_MB} MB, service to client`, unit: 'MB/s' },
];

function measure(kind: CaseKind, target: Target, upload: string): Promise<Result> {
  switch (kind) {
    case 'keepalive-1':
      return wrkRun(target.httpPort, target.host, false, 1);
    case 'keepalive':
      return wrkRun(target.httpPort, target.host, false);
    case 'newconn':
      return wrkRun(target.httpPort, target.host, true);
    case 'download':
      return bestTransfer(() => curlTransfer(target.httpPort, target.host, undefined));
    case 'upload':
      return bestTransfer(() => curlTransfer(target.httpPort, target.host, upload));
    case 'tcp-up':
      return bestTransfer(() => tunnelTcpBulk(target.tcpPort, 'up'));
    case 'tcp-down':
      return bestTransfer(() => tunnelTcpBulk(target.tcpPort, 'down'));
  }
}

/**
 * Data segments on the TCP link between the edge and the agent `pid`, each way, read from the
 * agent's socket with `ss -ti` (its `data_segs_in` are the edge's writes that reached it):
 * undefined where `ss` cannot tell (not Linux, no iproute2).
 */
async function agentLinkSegments(
  agentPort: number,
  pid: number,
): Promise<{ toAgent: number; fromAgent: number } | undefined> {
  const out = await run('ss', ['-tinpH', 'state', 'established', `dport = :${agentPort}`]).catch(
    () => '',
  );
  const lines = out.split('\n');
  let toAgent = 0;
  let fromAgent = 0;
  let found = false;
  for (let i = 0; i < lines.length - 1; i++) {
    if (!lines[i]!.includes(`pid=${pid},`)) continue;
    const info = lines[i + 1]!;
    toAgent += Number(/data_segs_in:(\d+)/.exec(info)?.[1] ?? 0);
    fromAgent += Number(/data_segs_out:(\d+)/.exec(info)?.[1] ?? 0);
    found = true;
  }
  return found ? { toAgent, fromAgent } : undefined;
}

/** CPU ms that each of `pids` used while `work` ran. */
async function cpuDuring<T>(pids: number[], work: () => Promise<T>): Promise<[T, number[]]> {
  const before = pids.map(processCpuMs);
  const result = await work();
  return [result, pids.map((pid, i) => processCpuMs(pid) - before[i]!)];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-tunnel-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const upload = join(dir, 'upload.bin');
  writeFileSync(upload, Buffer.alloc(HTTP_MB * MB, 0x62));
  const load = loadavg()[0]!.toFixed(1);
  const { reply: service, proc: serviceProc } = await roles.spawn<ServicePorts>('service');
  const servicePid = serviceProc.pid!;
  const edge: EdgeServer = await startEdgeServer({ cpuProfile: PROFILE });
  const agents: Partial<Record<AgentKind, AgentUrls>> = {};
  for (const kind of AGENTS) {
    const spec: AgentSpec = { ...(await edgeAddress(edge)), service };
    agents[kind] = await roles.start<AgentUrls>(kind, spec);
  }
  // Warm up every path (JIT, pools, certificates) before anything is measured.
  await wrkRun(service.http, 'localhost', false).catch(() => undefined);
  for (const kind of AGENTS) {
    const host = new URL(agents[kind]!.http).hostname;
    await wrkRun(edge.httpPort, host, false);
    // And the bulk path, so that no measured transfer runs the edge's and agent's bulk code cold.
    if (!ONLY || ONLY.includes('download')) await curlTransfer(edge.httpPort, host, undefined);
  }
  const memoryBefore = MEMORY ? await edge.gcMemory() : undefined;

  const rows: string[][] = [];
  const costs: string[][] = [];
  const segments: string[][] = [];
  const latency: string[][] = [];
  const agentPort = Number(edge.agentAddr.split(':').pop());
  for (const c of CASES) {
    if (ONLY && !ONLY.includes(c.kind)) continue;
    const direct = await measure(
      c.kind,
      { httpPort: service.http, host: 'localhost', tcpPort: service.tcp },
      upload,
    );
    const show = (r: Result) =>
      `${fmt(r.value)} ${c.unit}` +
      (r.p50Ms === undefined ? '' : ` (p50 ${fmt(r.p50Ms, 2)} / p99 ${fmt(r.p99Ms ?? 0, 2)} ms)`) +
      (r.errors ? ` [${r.errors} errors]` : '');
    const row = [c.name, show(direct)];
    for (const kind of AGENTS) {
      const urls = agents[kind]!;
      const target = {
        httpPort: edge.httpPort,
        host: new URL(urls.http).hostname,
        tcpPort: Number(new URL(urls.tcp).port),
      };
      const segsBefore = await agentLinkSegments(agentPort, urls.pid);
      const [tunnel, cpu] = await cpuDuring([edge.pid, urls.pid, servicePid], () =>
        measure(c.kind, target, upload),
      );
      const segsAfter = await agentLinkSegments(agentPort, urls.pid);
      row.push(`${show(tunnel)}, ${fmt((100 * tunnel.value) / direct.value)} %`);
      if (tunnel.p50Ms !== undefined && direct.p50Ms !== undefined) {
        // wrk's percentiles through the tunnel less the service's own, from the same run.
        const added = (t: number | undefined, d: number | undefined) => fmt((t ?? 0) - (d ?? 0), 2);
        latency.push([
          c.name,
          kind,
          added(tunnel.p50Ms, direct.p50Ms),
          added(tunnel.p99Ms, direct.p99Ms),
        ]);
      }
      // Per 1,000 requests or per GB moved (bulk runs measure the best of RUNS, CPU all of them).
      const per = c.unit === 'req/s' ? tunnel.units / 1000 : (tunnel.units * (RUNS || 1)) / 1e9;
      costs.push([
        c.name,
        kind,
        c.unit === 'req/s' ? 'per 1k requests' : 'per GB',
        ...cpu.map((ms) => fmt(ms / per, 1)),
      ]);
      if (segsBefore && segsAfter && c.unit === 'req/s') {
        const perRequest = (n: number) => fmt(n / tunnel.units, 2);
        segments.push([
          c.name,
          kind,
          perRequest(segsAfter.toAgent - segsBefore.toAgent),
          perRequest(segsAfter.fromAgent - segsBefore.fromAgent),
        ]);
      }
    }
    rows.push(row);
    process.stderr.write(`${c.name}: ${row.slice(1).join(' | ')}\n`);
  }

  const rssAfterLoad = edge.rss();
  const memoryAfterLoad = MEMORY ? await edge.gcMemory() : undefined;
  if (MEMORY) await new Promise((resolve) => setTimeout(resolve, 10_000));
  const memoryIdle = MEMORY ? await edge.gcMemory() : undefined;
  roles.killAll();
  const profile = await edge.stop();
  rmSync(dir, { recursive: true, force: true });

  console.log(
    `\nTunnel throughput, ${machine()}, ` +
      `load average ${load} at the start; ${DURATION} s per wrk run, best of ${RUNS} for transfers.\n`,
  );
  console.log(
    markdownTable(
      ['case', 'direct', ...AGENTS.map((a) => `through the tunnel, ${a} agent (% of direct)`)],
      rows,
    ),
  );
  console.log('\nCPU time (ms) spent by each process while the tunnel was measured:\n');
  console.log(markdownTable(['case', 'agent', 'unit', 'burrow server', 'agent', 'service'], costs));
  if (latency.length > 0) {
    console.log('\nLatency added by the tunnel (ms; wrk through the tunnel minus direct):\n');
    console.log(markdownTable(['case', 'agent', 'p50 added', 'p99 added'], latency));
  }
  if (segments.length > 0) {
    // Every segment is a write (a syscall, a TLS record) on one side and a wake-up on the other;
    // ACK probes (session.ts) show here as segments to the agent beyond the requests.
    console.log(
      '\nTCP data segments per request on the agent link (ss -ti of the agent socket):\n',
    );
    console.log(markdownTable(['case', 'agent', 'edge to agent', 'agent to edge'], segments));
  }
  if (memoryBefore && memoryAfterLoad && memoryIdle) {
    console.log('\nServer memory (after a full GC unless noted):\n');
    console.log(
      markdownTable(
        ['when', 'RSS', 'V8 heap used', 'external + array buffers'],
        [
          memoryRow('before the load', memoryBefore),
          ['right after the load, no GC', mib(rssAfterLoad), '-', '-'],
          memoryRow('after the load', memoryAfterLoad),
          memoryRow('after 10 s idle', memoryIdle),
        ],
      ),
    );
  }
  if (profile) {
    console.log(`\nCPU profile of the server: ${profile}\n`);
    console.log(formatSummary(summarizeProfile(profile, 25)));
  }
}

const role = process.argv[2];
const spec = process.argv[3] ? (JSON.parse(process.argv[3]) as AgentSpec) : undefined;
if (role === 'service') startBulkService().then(answer, fail);
else if (role === 'ngrok') await serveNgrok(spec!);
else if (role === 'sdk') await serveSdk(spec!);
else {
  // Children (and the server, see edge-process.ts) are killed when this process exits, however.
  process.once('exit', () => roles.killAll());
  exitOnSignals();
  await main();
  process.exit(0);
}
