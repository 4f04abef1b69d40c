/**
 * Bulk throughput through the muxado layer vs a raw socket, over loopback TCP and TLS.
 *
 *   node --import tsx bench/mux-throughput.ts            # 256 MiB per run, best of 3
 *   MB=512 RUNS=5 node --import tsx bench/mux-throughput.ts
 *   ONLY=tls node --import tsx bench/mux-throughput.ts   # one transport
 *   ONLY=tls PATHS=mux WINDOW=256 node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/mux-throughput.ts
 *                                                       # one case, profiled on both sides
 *   MUX_FRAME=16384 MUX_WRITE_BUFFER=1048576 ...            # tuning experiments
 *   MUX_ACK_PROBES=1 ...                                 # ACK probes on, as for ngrok/2 agents
 *
 * The receiving side runs in a child process so sender and receiver each get an event loop, as
 * they would in production (edge and agent). Each run sends MB mebibytes on one stream (or the
 * raw socket) and stops the clock when the receiver acknowledges the last byte.
 *
 * The `down` paths send the other way, from the accepting side to the connecting side, as the edge
 * sends to an agent: `down` with Node's reads (a fresh buffer per TCP read or TLS record),
 * `down-slab` with the reads into slabs the SDK's link uses (slabReads). PATHS=down,down-slab
 * runs only those.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import * as protocol from '../src/protocol/index.js';
import {
  BURROW_ALPN,
  DEFAULT_WINDOW,
  BURROW_WINDOW,
  MuxSession,
  windowForAlpn,
} from '../src/protocol/index.js';
import { selfSignedCert } from '../test/support/mux.js';

const MIB = 1024 * 1024;
const TOTAL = Number(process.env.MB ?? 256) * MIB;
const RUNS = Number(process.env.RUNS ?? 3);
/** The mux stream gets 64 KiB writes, like a piped socket; the raw baseline 512 KiB ones, its best. */
const STREAM_CHUNK = 64 * 1024;
const RAW_CHUNK = 512 * 1024;
/** Optional session tuning, for experiments: MUX_FRAME (max frame bytes), MUX_WRITE_BUFFER. */
const TUNING = {
  ...(process.env.MUX_FRAME ? { maxFrameSize: Number(process.env.MUX_FRAME) } : {}),
  ...(process.env.MUX_WRITE_BUFFER
    ? { writeBufferSize: Number(process.env.MUX_WRITE_BUFFER) }
    : {}),
  // As the edge runs for ngrok/2 agents (MuxSessionOptions.ackProbes).
  ...(process.env.MUX_ACK_PROBES === '1' ? { ackProbes: true } : {}),
};

type Mode = 'raw' | 'mux' | 'down' | 'down-slab';
/** Absent from protocol versions before it (the bench also runs against older copies). */
const slabReads = (protocol as Partial<typeof protocol>).slabReads;
interface Case {
  transport: 'tcp' | 'tls';
  mode: Mode;
  window: number;
}

// ---- garbage collections, counted on each side ---------------------------------------------

/** Collections so far in this process: major (mark-compact) count and all collections' ms. */
const gcSeen = { major: 0, ms: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcSeen.ms += entry.duration;
    const kind = (entry as { detail?: { kind?: number } }).detail?.kind;
    if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) gcSeen.major++;
  }
}).observe({ entryTypes: ['gc'] });

/** GC entries are delivered asynchronously: let the observer catch up before reading. */
const gcSettled = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

// ---- receiver (child process) ------------------------------------------------------------

function receive(
  socket: net.Socket | tls.TLSSocket,
  alpn: string | false | null | undefined,
): void {
  socket.once('data', (first: Buffer) => {
    const cpuStart = process.cpuUsage();
    const gcStart = { ...gcSeen };
    const ack = (): string => {
      const used = process.cpuUsage(cpuStart);
      return `k ${used.user + used.system} ${gcSeen.major - gcStart.major} ${gcSeen.ms - gcStart.ms}`;
    };
    socket.pause();
    const mode = String.fromCharCode(first[0]!);
    if (first.length > 1) socket.unshift(first.subarray(1));
    if (mode === 'r') {
      let got = 0;
      socket.on('data', (d: Buffer) => {
        got += d.length;
        if (got === TOTAL) socket.end(ack());
      });
      socket.resume();
      return;
    }
    const window =
      alpn !== undefined ? windowForAlpn(alpn) : mode === 'M' ? BURROW_WINDOW : DEFAULT_WINDOW;
    const session = new MuxSession(socket, { ...TUNING, role: 'server', window });
    session.on('stream', (stream: net.Socket) => {
      stream.on('error', () => {});
      stream.once('data', (head: Buffer) => {
        const kind = String.fromCharCode(head[0]!);
        if (kind === 'D') {
          // Down: send, and report this side's CPU when the other side asks (stream '?').
          writeAll(stream, STREAM_CHUNK, () => stream.end());
          stream.resume();
          return;
        }
        if (kind === '?') {
          stream.end(ack());
          return;
        }
        let got = head.length;
        stream.on('data', (d: Buffer) => (got += d.length));
        stream.on('end', () => stream.end(got === TOTAL ? ack() : 'x'));
      });
    });
    socket.resume();
  });
  socket.on('error', () => {});
}

function serve(): void {
  // Exit cleanly when the parent is done, so `node --cpu-prof` writes this side's profile too.
  process.on('SIGTERM', () => process.exit(0));
  const key = readFileSync(process.env.BENCH_KEY!);
  const cert = readFileSync(process.env.BENCH_CERT!);
  const plain = net.createServer((s) => receive(s, undefined));
  const secure = tls.createServer({ key, cert, ALPNProtocols: [BURROW_ALPN] }, (s) =>
    receive(s, s.alpnProtocol),
  );
  plain.listen(0, '127.0.0.1', () =>
    secure.listen(0, '127.0.0.1', () => {
      const p = (plain.address() as net.AddressInfo).port;
      const t = (secure.address() as net.AddressInfo).port;
      process.stdout.write(`${p} ${t}\n`);
    }),
  );
}

// ---- sender (parent) ---------------------------------------------------------------------

async function connect(c: Case, ports: [number, number], ca: Buffer): Promise<net.Socket> {
  const reads = c.mode === 'down-slab' ? slabReads!() : undefined;
  const onread = reads ? { onread: reads.onread } : {};
  if (c.transport === 'tcp') {
    const s = net.connect({ port: ports[0], host: '127.0.0.1', ...onread });
    reads?.attach(s);
    await new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject));
    s.setNoDelay(true);
    return s;
  }
  const s = tls.connect({
    port: ports[1],
    host: '127.0.0.1',
    ca,
    // Offer our ALPN only when the case wants the larger window, as the SDK would.
    ALPNProtocols: c.mode !== 'raw' && c.window === BURROW_WINDOW ? [BURROW_ALPN] : [],
    ...onread,
  } as tls.ConnectionOptions);
  reads?.attach(s);
  await new Promise((resolve, reject) => s.once('secureConnect', resolve).once('error', reject));
  return s;
}

/** Everything `stream` yields until it ends. */
function readToEnd(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  stream.on('data', (d: Buffer) => parts.push(d));
  return new Promise((resolve) => stream.once('end', () => resolve(Buffer.concat(parts))));
}

function writeAll(out: NodeJS.WritableStream, size: number, done: () => void): void {
  const chunk = Buffer.alloc(size, 0x61);
  let sent = 0;
  const more = (): void => {
    while (sent < TOTAL) {
      sent += size;
      if (!out.write(chunk)) {
        out.once('drain', more);
        return;
      }
    }
    done();
  };
  more();
}

interface Result {
  mibPerSecond: number;
  /** CPU milliseconds per GiB moved, sender and receiver. */
  senderCpu: number;
  receiverCpu: number;
  /** Major (mark-compact) collections per GiB, and milliseconds in all collections per GiB. */
  senderMajorGc: number;
  receiverMajorGc: number;
  senderGcMs: number;
  receiverGcMs: number;
}

async function runCase(c: Case, ports: [number, number], ca: Buffer): Promise<Result> {
  const socket = await connect(c, ports, ca);
  socket.write(c.mode === 'raw' ? 'r' : c.window === BURROW_WINDOW ? 'M' : 'm');
  await gcSettled();
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  const gcStart = { ...gcSeen };
  let reply: Buffer;
  /** In the down cases this process receives: the columns swap. */
  const down = c.mode === 'down' || c.mode === 'down-slab';
  if (down) {
    const session = new MuxSession(socket, { ...TUNING, role: 'client', window: c.window });
    const stream = session.openStream();
    let got = 0;
    stream.on('data', (d: Buffer) => (got += d.length));
    const ended = new Promise((resolve) => stream.once('end', resolve));
    stream.write('D');
    await ended;
    if (got !== TOTAL) throw new Error(`received ${got} of ${TOTAL} bytes`);
    const ask = session.openStream();
    const answer = readToEnd(ask);
    ask.end('?');
    reply = await answer;
    session.close();
  } else if (c.mode === 'raw') {
    const acked = new Promise<Buffer>((resolve) => socket.once('data', resolve));
    writeAll(socket, RAW_CHUNK, () => {});
    reply = await acked;
    socket.destroy();
  } else {
    const session = new MuxSession(socket, { ...TUNING, role: 'client', window: c.window });
    const stream = session.openStream();
    const acked = new Promise<Buffer>((resolve) => stream.once('data', resolve));
    writeAll(stream, STREAM_CHUNK, () => stream.end());
    reply = await acked;
    session.close();
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  await gcSettled();
  const [mark, receiverMicros, receiverMajor, receiverGcMs] = reply.toString().split(' ');
  if (mark !== 'k') throw new Error('receiver saw the wrong byte count');
  const gib = TOTAL / (1024 * MIB);
  const perGiB = (micros: number): number => micros / 1000 / gib;
  const here = {
    cpu: perGiB(cpu.user + cpu.system),
    major: (gcSeen.major - gcStart.major) / gib,
    gcMs: (gcSeen.ms - gcStart.ms) / gib,
  };
  const there = {
    cpu: perGiB(Number(receiverMicros)),
    major: Number(receiverMajor) / gib,
    gcMs: Number(receiverGcMs) / gib,
  };
  const [sender, receiver] = down ? [there, here] : [here, there];
  return {
    mibPerSecond: TOTAL / MIB / seconds,
    senderCpu: sender.cpu,
    receiverCpu: receiver.cpu,
    senderMajorGc: sender.major,
    receiverMajorGc: receiver.major,
    senderGcMs: sender.gcMs,
    receiverGcMs: receiver.gcMs,
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  try {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    const pems = selfSignedCert();
    writeFileSync(key, pems.key);
    writeFileSync(cert, pems.cert);
    const child = spawn(
      process.execPath,
      [...process.execArgv, fileURLToPath(import.meta.url), '--serve'],
      {
        env: { ...process.env, BENCH_KEY: key, BENCH_CERT: cert },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const line = await new Promise<string>((resolve) =>
      child.stdout.once('data', (d: Buffer) => resolve(d.toString())),
    );
    const ports = line.trim().split(' ').map(Number) as [number, number];
    const ca = readFileSync(cert);
    const cases: Case[] = [];
    const only = process.env.ONLY; // e.g. ONLY=tls to run one transport
    for (const transport of ['tcp', 'tls'] as const) {
      if (only && only !== transport) continue;
      cases.push({ transport, mode: 'raw', window: 0 });
      cases.push({ transport, mode: 'mux', window: DEFAULT_WINDOW });
      cases.push({ transport, mode: 'mux', window: BURROW_WINDOW });
      for (const mode of slabReads ? (['down', 'down-slab'] as const) : (['down'] as const)) {
        cases.push({ transport, mode, window: DEFAULT_WINDOW });
        cases.push({ transport, mode, window: BURROW_WINDOW });
      }
    }
    // PATHS=mux, raw, down or down-slab (comma-separated), WINDOW=256 or 4096 (KiB): narrow the
    // cases further, e.g. for a profile.
    const paths = process.env.PATHS?.split(',');
    const windowKiB = process.env.WINDOW ? Number(process.env.WINDOW) : undefined;
    for (let i = cases.length - 1; i >= 0; i--) {
      const c = cases[i]!;
      const drop =
        (paths !== undefined && !paths.includes(c.mode)) ||
        (windowKiB !== undefined && c.mode !== 'raw' && c.window !== windowKiB * 1024);
      if (drop) cases.splice(i, 1);
    }
    const best = new Map<Case, Result>();
    for (let run = 0; run < RUNS; run++) {
      for (const c of cases) {
        const result = await runCase(c, ports, ca);
        const previous = best.get(c);
        best.set(c, {
          mibPerSecond: Math.max(previous?.mibPerSecond ?? 0, result.mibPerSecond),
          senderCpu: Math.min(previous?.senderCpu ?? Infinity, result.senderCpu),
          receiverCpu: Math.min(previous?.receiverCpu ?? Infinity, result.receiverCpu),
          senderMajorGc: Math.min(previous?.senderMajorGc ?? Infinity, result.senderMajorGc),
          receiverMajorGc: Math.min(previous?.receiverMajorGc ?? Infinity, result.receiverMajorGc),
          senderGcMs: Math.min(previous?.senderGcMs ?? Infinity, result.senderGcMs),
          receiverGcMs: Math.min(previous?.receiverGcMs ?? Infinity, result.receiverGcMs),
        });
      }
    }
    child.kill();
    console.log(
      `\n${TOTAL / MIB} MiB per run, best of ${RUNS}, one stream, loopback, Node ${process.version}\n`,
    );
    console.log(
      '| transport | path | window | MiB/s | % of raw | sender CPU ms/GiB | receiver CPU ms/GiB |' +
        ' major GCs/GiB send / recv | GC ms/GiB send / recv |',
    );
    console.log('|---|---|---|---:|---:|---:|---:|---:|---:|');
    for (const c of cases) {
      const rawCase = cases.find((r) => r.transport === c.transport && r.mode === 'raw');
      const raw = rawCase ? best.get(rawCase) : undefined;
      const value = best.get(c)!;
      const window = c.mode === 'raw' ? '-' : `${c.window / 1024} KiB`;
      const share = raw ? `${((value.mibPerSecond / raw.mibPerSecond) * 100).toFixed(0)}%` : '-';
      console.log(
        `| ${c.transport} | ${c.mode} | ${window} | ${value.mibPerSecond.toFixed(0)} | ${share} | ` +
          `${value.senderCpu.toFixed(0)} | ${value.receiverCpu.toFixed(0)} | ` +
          `${value.senderMajorGc.toFixed(1)} / ${value.receiverMajorGc.toFixed(1)} | ` +
          `${value.senderGcMs.toFixed(1)} / ${value.receiverGcMs.toFixed(1)} |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--serve')) serve();
else await main();
