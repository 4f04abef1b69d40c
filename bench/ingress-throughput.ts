/**
 * Ingress benchmark: the same local service measured directly and through the edge's ingress, in
 * one run. The tunnels are fake (connect() dials the service over a real loopback TCP hop), so
 * this measures the ingress alone, not the agent protocol.
 *
 *   node --import tsx bench/ingress-throughput.ts
 *   DURATION=5 CONNECTIONS=50 HTTP_MB=100 TCP_MB=1000 RUNS=3 node --import tsx bench/ingress-throughput.ts
 *   ONLY=keepalive,tcp-up node --import tsx bench/ingress-throughput.ts
 *
 * Three processes: the service (child), the ingress (this process) and the load generator (a child
 * per measurement), so each has its own event loop as in production.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CertificateStore, LocalCa } from '../src/edge/certificates/certificates.js';
import { startIngress } from '../src/edge/ingress/ingress.js';
import { EdgeMetrics } from '../src/edge/metrics/metrics.js';
import { TunnelRegistry } from '../src/edge/registry/tunnel-registry.js';
import { fakeTunnel, freePort } from '../test/support/ingress.js';
import { fmt, machine, markdownTable } from './report.js';
import { httpCall, startBulkService, tcpBulk, type ServicePorts } from './support/bulk.js';
import { bestOf, closedLoop, keepAliveLoad } from './support/load.js';
import { answer, fail, RoleProcesses } from './support/roles.js';

const MB = 1024 * 1024;
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const HTTP_MB = Number(process.env.HTTP_MB ?? 100);
const TCP_MB = Number(process.env.TCP_MB ?? 1000);
const RUNS = Number(process.env.RUNS ?? 3);
/** Comma-separated case kinds to run (keepalive,newconn,download,upload,tcp-up,tcp-down). */
const ONLY = process.env.ONLY?.split(',');
const HOST = 'bench.burrow.test';

// ---- the load generator (child process) ---------------------------------------------------

interface LoadSpec {
  kind: 'keepalive' | 'newconn' | 'download' | 'upload' | 'tcp-up' | 'tcp-down';
  port: number;
}
interface LoadResult {
  rps?: number;
  p50?: number;
  p99?: number;
  mbps?: number;
  errors?: number;
}

/** MB/s of one transfer of `bytes` moved by `run`. */
async function timed(run: () => Promise<number>): Promise<number> {
  const started = performance.now();
  const bytes = await run();
  return bytes / MB / ((performance.now() - started) / 1000);
}

const bestMbps = (run: () => Promise<number>) => bestOf(RUNS, () => timed(run));

/** A whole TCP bulk transfer; resolves with the bytes moved (the clock is kept by timed()). */
async function tcpBulkBytes(port: number, direction: 'up' | 'down'): Promise<number> {
  await tcpBulk(port, direction, TCP_MB * MB);
  return TCP_MB * MB;
}

async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  switch (spec.kind) {
    case 'keepalive':
    case 'newconn': {
      const r =
        spec.kind === 'keepalive'
          ? await keepAliveLoad({
              port: spec.port,
              host: HOST,
              connections: CONNECTIONS,
              seconds: DURATION,
            })
          : await closedLoop(DURATION, Math.min(CONNECTIONS, 20), () =>
              httpCall(spec.port, HOST, '/small'),
            );
      return { rps: r.rate, p50: r.p50, p99: r.p99, errors: r.errors };
    }
    case 'download':
      return {
        mbps: await bestMbps(() => httpCall(spec.port, HOST, `/download?bytes=${HTTP_MB * MB}`)),
      };
    case 'upload':
      return { mbps: await bestMbps(() => httpCall(spec.port, HOST, '/upload', HTTP_MB * MB)) };
    case 'tcp-up':
      return { mbps: await bestMbps(() => tcpBulkBytes(spec.port, 'up')) };
    case 'tcp-down':
      return { mbps: await bestMbps(() => tcpBulkBytes(spec.port, 'down')) };
  }
}

// ---- the ingress and the report (this process) --------------------------------------------

const roles = new RoleProcesses(import.meta.url);

function measure(kind: LoadSpec['kind'], port: number): Promise<LoadResult> {
  return roles.start<LoadResult>('load', { kind, port });
}

async function main(): Promise<void> {
  const ports = await roles.start<ServicePorts>('upstream');
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  const registry = new TunnelRegistry();
  const certificates = new CertificateStore({
    ca: await LocalCa.loadOrCreate(dir),
    nameAllowed: () => true,
  });
  const ingress = await startIngress({
    httpListen: '127.0.0.1:0',
    httpsListen: '127.0.0.1:0',
    registry,
    metrics: new EdgeMetrics(),
    certificates,
  });
  const ingressHttp = Number(ingress.httpAddress.split(':').pop());
  const tcpPort = await freePort();
  registry.addTunnel(fakeTunnel({ proto: 'http', hostname: HOST, upstreamPort: ports.http }));
  registry.addTunnel(fakeTunnel({ proto: 'tcp', port: tcpPort, upstreamPort: ports.tcp }));
  await ingress.tcp.listening(tcpPort);
  const bare = createNetServer({ allowHalfOpen: true }, (client) => {
    const service = connect({ port: ports.tcp, host: '127.0.0.1', allowHalfOpen: true });
    client.pipe(service).on('error', () => client.destroy());
    service.pipe(client).on('error', () => service.destroy());
  });
  await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));
  const barePort = (bare.address() as AddressInfo).port;

  const cases: Array<{ name: string; kind: LoadSpec['kind']; direct: number; tunnel: number }> = [
    {
      name: 'HTTP keep-alive, small responses',
      kind: 'keepalive',
      direct: ports.http,
      tunnel: ingressHttp,
    },
    {
      name: 'HTTP new connection per request',
      kind: 'newconn',
      direct: ports.http,
      tunnel: ingressHttp,
    },
    {
      name: `HTTP ${HTTP_MB} MB download`,
      kind: 'download',
      direct: ports.http,
      tunnel: ingressHttp,
    },
    { name: `HTTP ${HTTP_MB} MB upload`, kind: 'upload', direct: ports.http, tunnel: ingressHttp },
    {
      name: `TCP bulk ${TCP_MB} MB, client to service`,
      kind: 'tcp-up',
      direct: ports.tcp,
      tunnel: tcpPort,
    },
    {
      name: `TCP bulk ${TCP_MB} MB, service to client`,
      kind: 'tcp-down',
      direct: ports.tcp,
      tunnel: tcpPort,
    },
    // Reference rows: a bare socket-to-socket pipe in this process, the floor cost of any relay
    // written in Node, to read the ingress's TCP figures against.
    {
      name: `(reference) bare Node pipe, ${TCP_MB} MB up`,
      kind: 'tcp-up',
      direct: ports.tcp,
      tunnel: barePort,
    },
    {
      name: `(reference) bare Node pipe, ${TCP_MB} MB down`,
      kind: 'tcp-down',
      direct: ports.tcp,
      tunnel: barePort,
    },
  ];
  const rows: string[][] = [];
  for (const c of cases) {
    if (ONLY && !ONLY.includes(c.kind)) continue;
    const direct = await measure(c.kind, c.direct);
    const tunnel = await measure(c.kind, c.tunnel);
    const unit = direct.mbps !== undefined ? 'MB/s' : 'req/s';
    const value = (r: LoadResult) => r.mbps ?? r.rps ?? 0;
    const latency = (r: LoadResult) =>
      r.p50 === undefined ? '' : ` (p50 ${fmt(r.p50, 1)} / p99 ${fmt(r.p99 ?? 0, 1)} ms)`;
    rows.push([
      c.name,
      `${fmt(value(direct))} ${unit}${latency(direct)}`,
      `${fmt(value(tunnel))} ${unit}${latency(tunnel)}`,
      `${fmt((100 * value(tunnel)) / value(direct))} %`,
    ]);
    process.stderr.write(`${c.name}: done\n`);
  }
  await ingress.close();
  bare.close();
  roles.killAll();
  rmSync(dir, { recursive: true, force: true });
  console.log(
    `\nIngress throughput, ${machine()}; ` +
      `${CONNECTIONS} connections, ${DURATION} s per HTTP run, best of ${RUNS} for bulk.\n`,
  );
  console.log(markdownTable(['case', 'direct', 'through the ingress', 'ingress / direct'], rows));
  console.log('\n(reference) rows put a bare Node socket pipe where the ingress is.');
}

const role = process.argv[2];
if (role === 'upstream') {
  startBulkService().then(answer, fail);
} else if (role === 'load') {
  runLoad(JSON.parse(process.argv[3]!) as LoadSpec).then((result) => {
    answer(result);
    process.exit(0);
  }, fail);
} else {
  main().catch(fail);
}
