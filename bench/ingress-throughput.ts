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
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingMessage } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { CertificateStore, LocalCa } from '../src/edge/certificates.js';
import { startIngress } from '../src/edge/ingress.js';
import { EdgeMetrics } from '../src/edge/metrics.js';
import { TunnelRegistry } from '../src/edge/tunnel-registry.js';
import { fakeTunnel, freePort } from '../src/test-support/ingress.js';
import { fmt, markdownTable, percentile } from './report.js';

const MB = 1024 * 1024;
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const HTTP_MB = Number(process.env.HTTP_MB ?? 100);
const TCP_MB = Number(process.env.TCP_MB ?? 1000);
const RUNS = Number(process.env.RUNS ?? 3);
/** Comma-separated case kinds to run (keepalive,newconn,download,upload,tcp-up,tcp-down). */
const ONLY = process.env.ONLY?.split(',');
const HOST = 'bench.burrow.test';
const BLOCK = Buffer.alloc(256 * 1024, 0x61);

// ---- the service (child process) ----------------------------------------------------------

function serveUpstream(): void {
  const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/download') {
      let left = Number(url.searchParams.get('mb')) * MB;
      res.writeHead(200, { 'Content-Length': left });
      const pump = (): void => {
        while (left > 0) {
          const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
          left -= chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    } else if (url.pathname === '/upload') {
      let bytes = 0;
      req.on('data', (c: Buffer) => (bytes += c.length));
      req.on('end', () => res.end(String(bytes)));
    } else {
      res.end('hello world\n');
    }
  });
  http.keepAliveTimeout = 60_000;
  // 'u': count what the client sends until its FIN, answer "ok". 'd' + uint32 MB: send that much.
  const tcp = createNetServer({ allowHalfOpen: true }, (socket) => {
    socket.once('data', (first: Buffer) => {
      if (first[0] === 0x64) {
        let left = first.readUInt32BE(1) * MB;
        const pump = (): void => {
          while (left > 0) {
            const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
            left -= chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
          socket.end();
        };
        pump();
      } else {
        socket.on('data', () => undefined);
        socket.on('end', () => socket.end('ok'));
      }
    });
    socket.on('error', () => socket.destroy());
  });
  http.listen(0, '127.0.0.1', () => {
    tcp.listen(0, '127.0.0.1', () => {
      const ports = {
        http: (http.address() as AddressInfo).port,
        tcp: (tcp.address() as AddressInfo).port,
      };
      process.stdout.write(JSON.stringify(ports) + '\n');
    });
  });
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

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

function timed(run: () => Promise<number>): Promise<number> {
  const started = performance.now();
  return run().then((bytes) => bytes / MB / ((performance.now() - started) / 1000));
}

async function bestOf(run: () => Promise<number>): Promise<number> {
  let best = 0;
  for (let i = 0; i < RUNS; i++) best = Math.max(best, await timed(run));
  return best;
}

function httpCall(port: number, path: string, method = 'GET', body?: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method, agent: false, headers: { Host: HOST } },
      (res: IncomingMessage) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve(body ?? bytes));
      },
    );
    req.on('error', reject);
    if (body === undefined) return void req.end();
    req.setHeader('Content-Length', body);
    let left = body;
    const pump = (): void => {
      while (left > 0) {
        const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
        left -= chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

function tcpBulk(port: number, direction: 'up' | 'down'): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = 0;
    socket.on('data', (c: Buffer) => (received += c.length));
    socket.on('end', () => resolve(direction === 'down' ? received : TCP_MB * MB));
    socket.on('error', reject);
    socket.setNoDelay(true);
    if (direction === 'down') {
      const head = Buffer.alloc(5);
      head[0] = 0x64;
      head.writeUInt32BE(TCP_MB, 1);
      socket.write(head);
      return;
    }
    socket.write('u');
    let left = TCP_MB * MB;
    const pump = (): void => {
      while (left > 0) {
        const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
        left -= chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
      socket.end();
    };
    pump();
  });
}

async function newConnectionLoad(port: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + DURATION * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const started = performance.now();
      try {
        await httpCall(port, '/small');
        latencies.push(performance.now() - started);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONNECTIONS, 20) }, worker));
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / DURATION,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
  };
}

async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  switch (spec.kind) {
    case 'keepalive': {
      const r = await autocannon({
        url: `http://127.0.0.1:${spec.port}/small`,
        headers: { host: HOST },
        connections: CONNECTIONS,
        duration: DURATION,
      });
      return {
        rps: r.requests.average,
        p50: r.latency.p50,
        p99: r.latency.p99,
        errors: r.errors + r.non2xx,
      };
    }
    case 'newconn':
      return newConnectionLoad(spec.port);
    case 'download':
      return { mbps: await bestOf(() => httpCall(spec.port, `/download?mb=${HTTP_MB}`)) };
    case 'upload':
      return { mbps: await bestOf(() => httpCall(spec.port, '/upload', 'POST', HTTP_MB * MB)) };
    case 'tcp-up':
      return { mbps: await bestOf(() => tcpBulk(spec.port, 'up')) };
    case 'tcp-down':
      return { mbps: await bestOf(() => tcpBulk(spec.port, 'down')) };
  }
}

// ---- the ingress and the report (this process) --------------------------------------------

const self = fileURLToPath(import.meta.url);

function child(args: string[]): { output: Promise<string>; stop(): void } {
  const proc = spawn(process.execPath, ['--import', 'tsx', self, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.setEncoding('utf8');
  const output = new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (d: string) => {
      out += d;
      if (out.endsWith('\n')) resolve(out.trim());
    });
    proc.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
  return { output, stop: () => proc.stdin.end() };
}

async function measure(kind: LoadSpec['kind'], port: number): Promise<LoadResult> {
  const load = child(['load', JSON.stringify({ kind, port })]);
  return JSON.parse(await load.output) as LoadResult;
}

async function main(): Promise<void> {
  const upstream = child(['upstream']);
  const ports = JSON.parse(await upstream.output) as { http: number; tcp: number };
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
  upstream.stop();
  rmSync(dir, { recursive: true, force: true });
  const cpu = cpus();
  console.log(
    `\nIngress throughput, Node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}; ` +
      `${CONNECTIONS} connections, ${DURATION} s per HTTP run, best of ${RUNS} for bulk.\n`,
  );
  console.log(markdownTable(['case', 'direct', 'through the ingress', 'ingress / direct'], rows));
  console.log('\n(reference) rows put a bare Node socket pipe where the ingress is.');
}

const role = process.argv[2];
if (role === 'upstream') {
  serveUpstream();
} else if (role === 'load') {
  runLoad(JSON.parse(process.argv[3]!) as LoadSpec).then(
    (result) => {
      process.stdout.write(JSON.stringify(result) + '\n');
      process.exit(0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
