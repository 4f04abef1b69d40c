/**
 * TCP edge benchmark: bulk throughput and connection rate to one local service, measured in one
 * run directly, through a TCP edge (hostport listener -> labeled tunnel of an SDK agent), and
 * through an ordinary TCP endpoint of the same agent, so the edge's own cost shows against both.
 *
 *   node --import tsx bench/edge-throughput.ts
 *   MB=512 RUNS=3 DURATION=5 CONNECTIONS=20 node --import tsx bench/edge-throughput.ts
 *
 * Four processes, each with its own event loop as in production: the edge (agent listener,
 * ingress, edge runtime, SQLite store), the SDK agent, the local service, and this process as the
 * public client.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { EdgeRuntime } from '../src/edge/edge-runtime.js';
import { ID_PREFIX, newId } from '../src/core/ids.js';
import { nowRfc3339 } from '../src/store/paging.js';
import { connect } from '../src/sdk/index.js';
import { freePort } from '../src/test-support/ingress.js';
import { startSdkTestEdge } from '../src/test-support/sdk-edge.js';
import { fmt, markdownTable, percentile } from './report.js';

const MIB = 1024 * 1024;
const MB = Number(process.env.MB ?? 256);
const RUNS = Number(process.env.RUNS ?? 3);
const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 20);
const BLOCK = Buffer.alloc(256 * 1024, 0x61);

// ---- the local service (child) ----------------------------------------------------------

/** `d<bytes>\n`: send that many bytes and end. `u…`: count until the end, answer. `p`: "pong". */
function serveService(): void {
  const tcp = net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => undefined);
    socket.once('data', (first: Buffer) => {
      if (first[0] === 0x70) return void socket.end('pong');
      if (first[0] === 0x64) {
        let left = Number(first.toString().slice(1).trim());
        const pump = (): void => {
          while (left > 0) {
            const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
            left -= chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
          socket.end();
        };
        return pump();
      }
      let got = first.length - 1;
      socket.on('data', (c: Buffer) => (got += c.length));
      socket.on('end', () => socket.end(`ok ${got}`));
    });
  });
  tcp.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (tcp.address() as net.AddressInfo).port })}\n`);
  });
}

// ---- the edge (child) and the SDK agent (child) -----------------------------------------

interface EdgeInfo {
  serverAddr: string;
  caFile: string;
  token: string;
  edgeId: string;
  edgePort: number;
}

async function serveEdge(): Promise<void> {
  const edge = await startSdkTestEdge('sqlite');
  const runtime = new EdgeRuntime({
    repos: edge.repos,
    registry: edge.registry,
    // TCP edges only: no certificate is ever asked for.
    certificates: { certificateFor: () => Promise.reject(new Error('no TLS edges here')) },
    bindHost: '127.0.0.1',
  });
  await runtime.start();
  const edgePort = await freePort();
  const addr = `tcp.burrow.test:${edgePort}`;
  await edge.store.db
    .insertInto('reserved_addrs')
    .values({
      id: newId(ID_PREFIX.reservedAddr),
      description: 'bench',
      metadata: '',
      created_at: nowRfc3339(),
      addr,
      port: edgePort,
      region: 'us',
    })
    .execute();
  const created = await edge.repos.edges.create('tcp', { hostports: [addr] });
  const backend = await edge.repos.backends.tunnelGroups.create({ labels: { edge: created.id } });
  await edge.repos.edges.setModule('tcp', created.id, 'backend', { backend_id: backend.id });
  await runtime.sync();
  await runtime.listening(edgePort);
  const info: EdgeInfo = {
    serverAddr: edge.serverAddr,
    caFile: edge.caFile,
    token: await edge.token(),
    edgeId: created.id,
    edgePort,
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connect({
    serverAddr: spec.edge.serverAddr,
    authtoken: spec.edge.token,
    ca: spec.edge.caFile,
  });
  await session.labeledTunnel({ labels: { edge: spec.edge.edgeId }, forward: spec.service });
  const tcp = await session.tcpEndpoint({ forward: spec.service });
  process.stdout.write(`${JSON.stringify({ endpointPort: Number(new URL(tcp.url!).port) })}\n`);
}

// ---- the public client and the report (this process) ------------------------------------

const children: ChildProcess[] = [];

async function child<T>(role: string, arg?: unknown): Promise<T> {
  const self = fileURLToPath(import.meta.url);
  const args = ['--import', 'tsx', self, role, ...(arg === undefined ? [] : [JSON.stringify(arg)])];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(proc);
  const [line] = (await once(proc.stdout, 'data')) as [Buffer];
  return JSON.parse(line.toString()) as T;
}

/** One bulk transfer of MB MiB through `port`; MiB/s. */
async function bulk(port: number, direction: 'up' | 'down'): Promise<number> {
  const bytes = MB * MIB;
  const started = performance.now();
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true, noDelay: true });
  await once(socket, 'connect');
  let got = 0;
  let reply = '';
  const ended = new Promise<void>((resolve, reject) => {
    socket.on('data', (c: Buffer) => {
      got += c.length;
      if (direction === 'up') reply += c.toString();
    });
    socket.on('end', resolve);
    socket.on('error', reject);
  });
  if (direction === 'down') {
    socket.end(`d${bytes}\n`);
  } else {
    socket.write('u');
    let left = bytes;
    while (left > 0) {
      const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
      left -= chunk.length;
      if (!socket.write(chunk)) await once(socket, 'drain');
    }
    socket.end();
  }
  await ended;
  socket.destroy();
  const complete = direction === 'down' ? got === bytes : reply === `ok ${bytes}`;
  if (!complete) throw new Error(`${direction}: incomplete (${got} bytes, '${reply}')`);
  return bytes / MIB / ((performance.now() - started) / 1000);
}

/** New connections per second (connect, one exchange, close) from CONNECTIONS workers. */
async function connectionRate(port: number): Promise<{ rate: number; p50: number; p99: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + DURATION * 1000;
  const once_ = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true, noDelay: true });
      let reply = '';
      socket.once('connect', () => socket.end('p'));
      socket.on('data', (c: Buffer) => (reply += c.toString()));
      socket.once('end', () => {
        socket.destroy();
        if (reply === 'pong') resolve();
        else reject(new Error(`got '${reply}'`));
      });
      socket.once('error', reject);
    });
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const started = performance.now();
      try {
        await once_();
        latencies.push(performance.now() - started);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  if (errors > 0) process.stderr.write(`connection rate on ${port}: ${errors} errors\n`);
  latencies.sort((a, b) => a - b);
  return {
    rate: latencies.length / DURATION,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

async function main(): Promise<void> {
  const service = await child<{ port: number }>('service');
  const edge = await child<EdgeInfo>('edge');
  const agent = await child<{ endpointPort: number }>('agent', { edge, service: service.port });
  const targets = { direct: service.port, edge: edge.edgePort, endpoint: agent.endpointPort };
  const rows: string[][] = [];
  type Target = keyof typeof targets;
  const order: Target[] = ['direct', 'edge', 'endpoint'];
  // Rounds interleave the three paths, so warm-up and machine noise hit them alike.
  for (const direction of ['up', 'down'] as const) {
    const best: Record<Target, number> = { direct: 0, edge: 0, endpoint: 0 };
    for (let run = 0; run < RUNS; run++) {
      for (const t of order) best[t] = Math.max(best[t], await bulk(targets[t], direction));
    }
    rows.push([
      `TCP bulk ${MB} MiB, ${direction === 'up' ? 'client to service' : 'service to client'}`,
      ...order.map((t) => `${fmt(best[t])} MiB/s`),
      `${fmt((100 * best.edge) / best.direct)} %`,
    ]);
    process.stderr.write(`bulk ${direction}: done\n`);
  }
  type Rate = Awaited<ReturnType<typeof connectionRate>>;
  const rate: Partial<Record<Target, Rate>> = {};
  for (let run = 0; run < RUNS; run++) {
    for (const t of order) {
      const r = await connectionRate(targets[t]);
      if (r.rate > (rate[t]?.rate ?? 0)) rate[t] = r;
    }
  }
  const show = (r: Rate | undefined) =>
    r ? `${fmt(r.rate)} conn/s (p50 ${fmt(r.p50, 1)} / p99 ${fmt(r.p99, 1)} ms)` : '';
  rows.push([
    `New connection per exchange, ${CONNECTIONS} at a time`,
    ...order.map((t) => show(rate[t])),
    `${fmt((100 * (rate.edge?.rate ?? 0)) / (rate.direct?.rate ?? 1))} %`,
  ]);
  for (const c of children) c.kill('SIGKILL');
  const cpu = cpus();
  console.log(
    `\nTCP edge throughput, Node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}; ` +
      `best of ${RUNS} interleaved rounds; ${DURATION} s per connection-rate run.\n`,
  );
  console.log(
    markdownTable(
      ['case', 'direct', 'TCP edge (labeled tunnel)', 'TCP endpoint (same agent)', 'edge / direct'],
      rows,
    ),
  );
}

const role = process.argv[2];
const fail = (err: unknown): void => {
  console.error(err);
  process.exit(1);
};
if (role === 'service') serveService();
else if (role === 'edge') serveEdge().catch(fail);
else if (role === 'agent') {
  serveAgent(JSON.parse(process.argv[3]!) as { edge: EdgeInfo; service: number }).catch(fail);
} else {
  main().then(() => process.exit(0), fail);
}
