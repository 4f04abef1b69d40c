/**
 * Bulk throughput through a whole tunnel with the Burrow SDK as the agent: public client -> edge
 * ingress -> agent session (muxado over TLS) -> SDK -> local service, and back. Compares the
 * large stream window the SDK negotiates with ALPN `burrow/1` (4 MiB) against the protocol's
 * standard 256 KiB, on plain loopback and with 50 ms of added round-trip time on the agent link.
 *
 *   node --import tsx bench/sdk-throughput.ts
 *   MB=256 RTT_MB=48 RUNS=3 node --import tsx bench/sdk-throughput.ts
 *   NO_RTT=1 node --import tsx bench/sdk-throughput.ts      # loopback only
 *
 * The round-trip time comes from `tc netem` (root needed), applied only to packets to and from
 * the agent listener's port so nothing else on the machine slows down; the qdisc is always
 * removed afterwards. Where tc is not allowed, a relay that delays each direction by 25 ms
 * stands in (RTT_MODE=relay forces it).
 *
 * Four processes, each with its own event loop as in production: the edge (agent listener,
 * ingress, SQLite store), two SDK agents (one per window), the local service, and this process
 * as the public client.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { connect } from '../src/sdk/index.js';
import { startSdkTestEdge } from '../src/test-support/sdk-edge.js';
import { fmt, markdownTable } from './report.js';

const MIB = 1024 * 1024;
const MB = Number(process.env.MB ?? 256);
const RTT_MB = Number(process.env.RTT_MB ?? 48);
const RUNS = Number(process.env.RUNS ?? 3);
const ONE_WAY_MS = 25;
const BLOCK = Buffer.alloc(256 * 1024, 0x61);

// ---- the local service (child) ----------------------------------------------------------

/** TCP: `d<bytes>\n` sends that many bytes and ends; `u` counts until the end and answers. */
function serveService(): void {
  const sendBytes = (out: NodeJS.WritableStream, total: number, done: () => void): void => {
    let left = total;
    const pump = (): void => {
      while (left > 0) {
        const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
        left -= chunk.length;
        if (!out.write(chunk)) return void out.once('drain', pump);
      }
      done();
    };
    pump();
  };
  const tcp = net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.once('data', (first: Buffer) => {
      if (first[0] === 0x64) {
        sendBytes(socket, Number(first.toString().slice(1).trim()), () => socket.end());
        return;
      }
      let got = first.length - 1;
      socket.on('data', (c: Buffer) => (got += c.length));
      socket.on('end', () => socket.end(`ok ${got}`));
    });
    socket.on('error', () => undefined);
  });
  const http = createServer((req, res) => {
    const bytes = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('bytes'));
    res.writeHead(200, { 'Content-Length': bytes });
    sendBytes(res, bytes, () => res.end());
  });
  tcp.listen(0, '127.0.0.1', () =>
    http.listen(0, '127.0.0.1', () => {
      const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
      process.stdout.write(`${JSON.stringify({ tcp: port(tcp), http: port(http) })}\n`);
    }),
  );
}

// ---- the edge (child) and an SDK agent (child) -------------------------------------------

async function serveEdge(): Promise<void> {
  const edge = await startSdkTestEdge('sqlite');
  const info = {
    serverAddr: edge.serverAddr,
    caFile: edge.caFile,
    httpPort: edge.httpPort,
    token: await edge.token(),
  };
  process.stdout.write(`${JSON.stringify(info)}\n`);
  process.on('SIGTERM', () => void edge.close().then(() => process.exit(0)));
}

async function serveAgent(spec: {
  edge: EdgeInfo;
  service: ServiceInfo;
  window: Window;
}): Promise<void> {
  const session = await connect({
    serverAddr: spec.edge.serverAddr,
    authtoken: spec.edge.token,
    ca: spec.edge.caFile,
    window: spec.window,
  });
  const tcp = await session.tcpEndpoint({ forward: spec.service.tcp });
  const web = await session.httpEndpoint({ scheme: 'http', forward: spec.service.http });
  process.stdout.write(`${JSON.stringify({ tcp: tcp.url, http: web.url })}\n`);
}

// ---- the public client and the report (this process) ------------------------------------

type Window = 'large' | 'standard';
interface EdgeInfo {
  serverAddr: string;
  caFile: string;
  httpPort: number;
  token: string;
}
interface ServiceInfo {
  tcp: number;
  http: number;
}
interface AgentInfo {
  tcp: string;
  http: string;
}

const children: ChildProcess[] = [];

async function child<T>(role: string, arg?: unknown): Promise<T> {
  const self = fileURLToPath(import.meta.url);
  const args = ['--import', 'tsx', self, role, ...(arg === undefined ? [] : [JSON.stringify(arg)])];
  const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(proc);
  const [line] = (await once(proc.stdout, 'data')) as [Buffer];
  return JSON.parse(line.toString()) as T;
}

type Direction = 'tcp download' | 'tcp upload' | 'http download';

/** One transfer of `bytes` through `port` (TCP) or the ingress (HTTP); MiB/s. */
async function transfer(
  direction: Direction,
  port: number,
  host: string,
  bytes: number,
): Promise<number> {
  const started = performance.now();
  if (direction === 'http download') {
    await new Promise<void>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: `/?bytes=${bytes}`,
          headers: { Host: host },
          agent: false,
        },
        (res) => {
          let got = 0;
          res.on('data', (c: Buffer) => (got += c.length));
          res.on('end', () =>
            got === bytes ? resolve() : reject(new Error(`got ${got} of ${bytes}`)),
          );
        },
      );
      req.on('error', reject);
      req.end();
    });
  } else {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    let got = 0;
    let reply = '';
    const ended = new Promise<void>((resolve, reject) => {
      socket.on('data', (c: Buffer) => {
        got += c.length;
        if (direction === 'tcp upload') reply += c.toString();
      });
      socket.on('end', resolve);
      socket.on('error', reject);
    });
    if (direction === 'tcp download') {
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
    const ok = direction === 'tcp download' ? got === bytes : reply === `ok ${bytes}`;
    if (!ok) throw new Error(`${direction}: transfer incomplete (${got} bytes, reply '${reply}')`);
  }
  return bytes / MIB / ((performance.now() - started) / 1000);
}

// ---- added round-trip time ---------------------------------------------------------------

function tc(...args: string[]): void {
  execFileSync('tc', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

let qdiscAdded = false;
function removeQdisc(): void {
  if (!qdiscAdded) return;
  qdiscAdded = false;
  try {
    tc('qdisc', 'del', 'dev', 'lo', 'root');
  } catch (err) {
    process.stderr.write(
      `could not remove the qdisc: run 'tc qdisc del dev lo root' (${String(err)})\n`,
    );
  }
}

/** netem on loopback for the agent listener's port only; false when tc is not allowed. */
function addNetem(port: number): boolean {
  try {
    // Everything else stays in an undelayed band; only the agent link goes through netem.
    tc(
      'qdisc',
      'add',
      'dev',
      'lo',
      'root',
      'handle',
      '1:',
      'prio',
      'bands',
      '3',
      'priomap',
      ...Array<string>(16).fill('1'),
    );
    qdiscAdded = true;
    tc(
      'qdisc',
      'add',
      'dev',
      'lo',
      'parent',
      '1:3',
      'handle',
      '30:',
      'netem',
      'delay',
      `${ONE_WAY_MS}ms`,
      'limit',
      '100000',
    );
    for (const side of ['dport', 'sport']) {
      tc(
        'filter',
        'add',
        'dev',
        'lo',
        'parent',
        '1:',
        'protocol',
        'ip',
        'prio',
        '1',
        'u32',
        'match',
        'ip',
        side,
        String(port),
        '0xffff',
        'flowid',
        '1:3',
      );
    }
    return true;
  } catch (err) {
    removeQdisc();
    const why = String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim();
    process.stderr.write(`tc netem is not available (${why}); using a delaying relay\n`);
    return false;
  }
}

/** A relay that holds each chunk ONE_WAY_MS before passing it on, in both directions. */
async function startDelayRelay(target: number): Promise<net.Server> {
  const delayed = (from: net.Socket, to: net.Socket): void => {
    let queued = 0;
    from.on('data', (chunk: Buffer) => {
      queued += chunk.length;
      if (queued > 64 * MIB) from.pause(); // a deep but bounded link buffer
      setTimeout(() => {
        queued -= chunk.length;
        to.write(chunk);
        if (queued <= 64 * MIB) from.resume();
      }, ONE_WAY_MS);
    });
    from.on('end', () => setTimeout(() => to.end(), ONE_WAY_MS));
    from.on('error', () => to.destroy());
  };
  const relay = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    delayed(client, upstream);
    delayed(upstream, client);
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  return relay;
}

async function main(): Promise<void> {
  process.on('exit', removeQdisc);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      removeQdisc();
      process.exit(130);
    });
  }
  const service = await child<ServiceInfo>('service');
  const edge = await child<EdgeInfo>('edge');
  const agentPort = Number(edge.serverAddr.split(':')[1]);
  const cases: Direction[] = ['tcp download', 'tcp upload', 'http download'];
  const rows: string[][] = [];
  const measure = async (
    label: string,
    agents: Record<Window, AgentInfo>,
    bytes: number,
    runs: number,
    withDirect: boolean,
  ) => {
    for (const direction of cases) {
      const best = { direct: 0, large: 0, standard: 0 };
      for (let run = 0; run < runs; run++) {
        if (withDirect) {
          // The same service without the tunnel: what the hops and encryption cost.
          const port = direction === 'http download' ? service.http : service.tcp;
          best.direct = Math.max(best.direct, await transfer(direction, port, 'localhost', bytes));
        }
        for (const window of ['large', 'standard'] as const) {
          const url = new URL(
            direction === 'http download' ? agents[window].http : agents[window].tcp,
          );
          const port = direction === 'http download' ? edge.httpPort : Number(url.port);
          best[window] = Math.max(
            best[window],
            await transfer(direction, port, url.hostname, bytes),
          );
        }
      }
      rows.push([
        label,
        direction,
        `${bytes / MIB}`,
        withDirect ? fmt(best.direct) : '-',
        fmt(best.standard),
        fmt(best.large),
        `${fmt(best.large / best.standard, 1)}x`,
      ]);
      process.stderr.write(
        `${label} ${direction}: ${fmt(best.standard)} vs ${fmt(best.large)} MiB/s\n`,
      );
    }
  };
  const agentsVia = async (serverAddr: string) => ({
    large: await child<AgentInfo>('agent', {
      edge: { ...edge, serverAddr },
      service,
      window: 'large',
    }),
    standard: await child<AgentInfo>('agent', {
      edge: { ...edge, serverAddr },
      service,
      window: 'standard',
    }),
  });

  let rttNote = 'not measured';
  try {
    await measure('loopback', await agentsVia(edge.serverAddr), MB * MIB, RUNS, true);
    if (!process.env.NO_RTT) {
      if (process.env.RTT_MODE !== 'relay' && addNetem(agentPort)) {
        rttNote = `tc netem, ${ONE_WAY_MS} ms each way on the agent listener port`;
        await measure('+50 ms RTT', await agentsVia(edge.serverAddr), RTT_MB * MIB, 1, false);
      } else {
        const relay = await startDelayRelay(agentPort);
        rttNote = `a relay delaying each direction by ${ONE_WAY_MS} ms (no tc netem)`;
        const addr = `127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
        await measure('+50 ms RTT', await agentsVia(addr), RTT_MB * MIB, 1, false);
        relay.close();
      }
    }
  } finally {
    removeQdisc();
    for (const proc of children) proc.kill('SIGTERM');
  }
  console.log(
    `\nBulk throughput through a tunnel with the SDK as the agent, MiB/s, best of ${RUNS}`,
  );
  console.log(`(one connection; Node ${process.version}; added RTT: ${rttNote})\n`);
  console.log(
    markdownTable(
      ['link', 'transfer', 'MiB', 'direct', '256 KiB window', '4 MiB window (burrow/1)', 'gain'],
      rows,
    ),
  );
}

const role = process.argv[2];
if (role === 'service') serveService();
else if (role === 'edge') await serveEdge();
else if (role === 'agent')
  await serveAgent(JSON.parse(process.argv[3]!) as Parameters<typeof serveAgent>[0]);
else await main();
