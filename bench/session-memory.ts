/**
 * Memory per idle agent session: a real `burrow server` process, then SESSIONS agent sessions
 * (Burrow's SDK, each with one HTTP endpoint unless TUNNELS=0) opened from a child process and
 * left idle. The server's RSS and V8 heap are read after a forced full GC (bench/edge-process.ts)
 * before, with the sessions open, and after they closed (at once and 15 s later); the SDK process
 * reports its own figures
 * the same way.
 *
 *   npm run build && node --import tsx bench/session-memory.ts
 *   SESSIONS=2000 TUNNELS=0 node --import tsx bench/session-memory.ts
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Session } from '../src/sdk/index.js';
import { startEdgeServer, type ServerMemory } from './edge-process.js';
import { fmt, machine, markdownTable, memoryRow, mib } from './report.js';
import { exitOnSignals } from './support/roles.js';
import { connectAgent, edgeAddress, type EdgeAddress } from './support/sdk-agent.js';

const SESSIONS = Number(process.env.SESSIONS ?? 1000);
const TUNNELS = process.env.TUNNELS !== '0';
/** Sessions opened at once; the edge authenticates each against the store. */
const BATCH = 50;
const SETTLE_MS = 3000;

/** The agents (child): open the sessions, report, and close them all when stdin says so. */
async function runClients(spec: EdgeAddress): Promise<void> {
  const sessions: Session[] = [];
  const started = performance.now();
  for (let i = 0; i < SESSIONS; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, SESSIONS - i) }, async () => {
      const session = await connectAgent(spec, { reconnect: false });
      if (TUNNELS) await session.httpEndpoint({ forward: 9 });
      sessions.push(session);
    });
    await Promise.all(batch);
  }
  const seconds = (performance.now() - started) / 1000;
  const memory = (): ServerMemory => {
    (globalThis as { gc?: () => void }).gc?.();
    return process.memoryUsage();
  };
  const lines = createInterface({ input: process.stdin });
  const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
  say({ opened: sessions.length, seconds, memory: memory() });
  for await (const line of lines) {
    if (line === 'close') {
      await Promise.all(sessions.map((s) => s.close()));
      say({ closed: sessions.length });
    }
  }
  // stdin closed: the benchmark is over (or gone).
  process.exit(0);
}

const kib = (bytes: number) => `${fmt(bytes / 1024, 1)} KiB`;

async function main(): Promise<void> {
  const load = loadavg()[0]!.toFixed(1);
  const edge = await startEdgeServer();
  const spec = await edgeAddress(edge);
  // Warm the code paths (TLS, auth, bind, certificates) so that the baseline holds them already.
  const warm = await connectAgent(spec, { reconnect: false });
  await warm.httpEndpoint({ forward: 9 });
  await warm.close();
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const before = await edge.gcMemory();
  const selfBase = process.memoryUsage();

  const self = fileURLToPath(import.meta.url);
  const child = spawn(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', self, 'clients', JSON.stringify(spec)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const replies = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async <T>(): Promise<T> => JSON.parse((await replies.next()).value as string) as T;
  const opened = await next<{ opened: number; seconds: number; memory: ServerMemory }>();
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const withSessions = await edge.gcMemory();
  child.stdin.write('close\n');
  await next<{ closed: number }>();
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const afterClose = await edge.gcMemory();
  // V8's memory reducer gives unused heap pages back after ~8 s of quiet.
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  const later = await edge.gcMemory();
  child.stdin.end();
  child.kill('SIGTERM');
  await once(child, 'exit');
  await edge.stop();

  const n = opened.opened;
  const per = (a: number, b: number) => kib((a - b) / n);
  console.log(
    `\n${n} idle agent sessions${TUNNELS ? ', one HTTP endpoint each' : ''}, opened in ` +
      `${fmt(opened.seconds, 1)} s (${fmt(n / opened.seconds)} per s); ${machine()}, ` +
      `load average ${load} at the start.\n`,
  );
  console.log(
    markdownTable(
      ['burrow server (after a full GC)', 'RSS', 'V8 heap used', 'external + array buffers'],
      [
        memoryRow('before', before),
        memoryRow(`with ${n} sessions`, withSessions),
        memoryRow('after they closed', afterClose),
        memoryRow('15 s later', later),
        [
          'per session',
          per(withSessions.rss, before.rss),
          per(withSessions.heapUsed, before.heapUsed),
          per(withSessions.external, before.external),
        ],
      ],
    ),
  );
  console.log(
    `\nThe SDK process holding them: RSS ${mib(opened.memory.rss)}, V8 heap ` +
      `${mib(opened.memory.heapUsed)} (this bench process, for scale: ${mib(selfBase.rss)}).`,
  );
}

const role = process.argv[2];
if (role === 'clients') await runClients(JSON.parse(process.argv[3]!) as EdgeAddress);
else {
  // The server is killed when this process exits, however (see edge-process.ts).
  exitOnSignals();
  await main();
}
