/**
 * Bulk throughput through the muxado layer vs a raw socket, over loopback TCP and TLS.
 *
 *   node --import tsx bench/mux-throughput.ts            # 256 MiB per run, best of 3
 *   MB=512 RUNS=5 node --import tsx bench/mux-throughput.ts
 *   ONLY=tls node --import tsx bench/mux-throughput.ts   # one transport
 *   MUX_FRAME=16384 MUX_WRITE_BUFFER=1048576 ...            # tuning experiments
 *
 * The receiving side runs in a child process so sender and receiver each get an event loop, as
 * they would in production (edge and agent). Each run sends MB mebibytes on one stream (or the
 * raw socket) and stops the clock when the receiver acknowledges the last byte.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import {
  BURROW_ALPN,
  DEFAULT_WINDOW,
  BURROW_WINDOW,
  MuxSession,
  windowForAlpn,
} from '../src/protocol/index.js';

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
};

type Mode = 'raw' | 'mux';
interface Case {
  transport: 'tcp' | 'tls';
  mode: Mode;
  window: number;
}

// ---- receiver (child process) ------------------------------------------------------------

function receive(
  socket: net.Socket | tls.TLSSocket,
  alpn: string | false | null | undefined,
): void {
  socket.once('data', (first: Buffer) => {
    const cpuStart = process.cpuUsage();
    const ack = (): string => {
      const used = process.cpuUsage(cpuStart);
      return `k ${used.user + used.system}`;
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
      let got = 0;
      stream.on('error', () => {});
      stream.on('data', (d: Buffer) => (got += d.length));
      stream.on('end', () => stream.end(got === TOTAL ? ack() : 'x'));
    });
    socket.resume();
  });
  socket.on('error', () => {});
}

function serve(): void {
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
  if (c.transport === 'tcp') {
    const s = net.connect(ports[0], '127.0.0.1');
    await new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject));
    s.setNoDelay(true);
    return s;
  }
  const s = tls.connect({
    port: ports[1],
    host: '127.0.0.1',
    ca,
    // Offer our ALPN only when the case wants the larger window, as the SDK would.
    ALPNProtocols: c.mode === 'mux' && c.window === BURROW_WINDOW ? [BURROW_ALPN] : [],
  });
  await new Promise((resolve, reject) => s.once('secureConnect', resolve).once('error', reject));
  return s;
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
}

async function runCase(c: Case, ports: [number, number], ca: Buffer): Promise<Result> {
  const socket = await connect(c, ports, ca);
  socket.write(c.mode === 'raw' ? 'r' : c.window === BURROW_WINDOW ? 'M' : 'm');
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  let reply: Buffer;
  if (c.mode === 'raw') {
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
  const [mark, receiverMicros] = reply.toString().split(' ');
  if (mark !== 'k') throw new Error('receiver saw the wrong byte count');
  const cpu = process.cpuUsage(cpuStart);
  const perGiB = (micros: number): number => micros / 1000 / (TOTAL / (1024 * MIB));
  return {
    mibPerSecond: TOTAL / MIB / seconds,
    senderCpu: perGiB(cpu.user + cpu.system),
    receiverCpu: perGiB(Number(receiverMicros)),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
  try {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
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
        });
      }
    }
    child.kill();
    console.log(
      `\n${TOTAL / MIB} MiB per run, best of ${RUNS}, one stream, loopback, Node ${process.version}\n`,
    );
    console.log(
      '| transport | path | window | MiB/s | % of raw | sender CPU ms/GiB | receiver CPU ms/GiB |',
    );
    console.log('|---|---|---|---:|---:|---:|---:|');
    for (const c of cases) {
      const raw = best.get(cases.find((r) => r.transport === c.transport && r.mode === 'raw')!)!;
      const value = best.get(c)!;
      const window = c.mode === 'raw' ? '-' : `${c.window / 1024} KiB`;
      const share = ((value.mibPerSecond / raw.mibPerSecond) * 100).toFixed(0);
      console.log(
        `| ${c.transport} | ${c.mode} | ${window} | ${value.mibPerSecond.toFixed(0)} | ${share}% | ` +
          `${value.senderCpu.toFixed(0)} | ${value.receiverCpu.toFixed(0)} |`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--serve')) serve();
else await main();
