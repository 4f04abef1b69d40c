/**
 * What idle sessions and idle public connections cost one node (issue 35): a real `burrow server`
 * process on SQLite, measured from outside through /proc.
 *
 * - Sessions: SDK agent sessions (one HTTP endpoint each unless TUNNELS=0) opened in steps up to
 *   each of `SIZES` and left idle (the SDK's default 10 s heartbeat). At each step the server's
 *   CPU time (user + system) over `IDLE_S` seconds gives idle CPU per second, and per session.
 *   Then every session closes at once and RSS is read 3 s and 15 s later, and after a full GC.
 *   `HEARTBEAT_MS` sets the agents' heartbeat interval (default 10 s).
 * - Keep-alive connections: sessions with one HTTP endpoint each in front of a local service,
 *   then `CONNS` public HTTP/1.1 keep-alive connections spread over them, each having made one
 *   request, left idle.
 *
 * The agents run in child processes (at most `PER_CLIENT` sessions each); the public connections
 * are held by this process. Only the server's CPU is counted, but the agents share the cores.
 * `AGENT=ngrok` opens the sessions with the unmodified @ngrok/ngrok package instead of Burrow's
 * SDK (its default heartbeat: `HEARTBEAT_MS` applies to the SDK only).
 *
 * The server fits its caps to its open-files limit (src/edge/listeners/descriptor-budget.ts); the
 * run gives it caps that say what it is for (agents up to the largest of `SIZES`, the ingress
 * `CONNS`, the API a few), so that agents get what the others do not take. One address gets at
 * most half a listener's share, so SDK agents spread their sessions over `ADDRS` loopback source
 * addresses (127.0.0.2, 127.0.0.3, ...; one client process each); ngrok's agents come from
 * 127.0.0.1. Each session holds one descriptor in the server: at this machine's `ulimit -n`
 * 20,000 (hard) that is what runs out first (see docs/benchmarks.md).
 *
 * After the mass disconnect the allocator is asked what it holds: `/proc/<pid>/smaps_rollup`, and
 * with `MALLOC_INFO=1` glibc's `malloc_info`, then `malloc_trim(0)`, called in the server by a
 * preloaded probe (bench/support/malloc-probe.c, built with gcc): what of RSS the allocator keeps
 * and whether it can give it back. `MALLOC_ARENA_MAX` and other glibc variables pass through.
 *
 *   npm run build && npm run bench:idle-sessions
 *   TREES=before=/tmp/before-35,after=$PWD SIZES=500,1000,2000 node --import tsx bench/idle-sessions.ts
 *   SIZES=2000,5000,10000,15000 ADDRS=4 CONNS= MALLOC_INFO=1 npm run bench:idle-sessions
 */
import { createServer } from 'node:http';
import { connect as tcpConnect, type Socket } from 'node:net';
import { once } from 'node:events';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import type { Session } from '../src/sdk/index.js';
import { REPO_ROOT } from '../test/support/server-process.js';
import { startEdgeServer, type EdgeServer } from './edge-process.js';
import { fmt, machine, markdownTable, mib } from './report.js';
import { exitOnSignals, RoleProcesses } from './support/roles.js';
import { connectAgent, edgeAddress, type EdgeAddress } from './support/sdk-agent.js';
import { connectNgrok } from './support/ngrok-agent.js';

const SIZES = (process.env.SIZES ?? '500,1000,2000').split(',').map(Number);
const CONNS = (process.env.CONNS ?? '1000,2500,5000').split(',').filter(Boolean).map(Number);
/**
 * Public connections per endpoint: the edge holds one tunnel stream per open public connection,
 * and a session proxies at most 400 streams at once (`maxProxyStreams`), so the connections are
 * spread over several endpoints, one session each.
 */
const CONNS_PER_ENDPOINT = 250;
const IDLE_S = Number(process.env.IDLE_S ?? 20);
const TUNNELS = process.env.TUNNELS !== '0';
const PER_CLIENT = Number(process.env.PER_CLIENT ?? 5000);
const AGENT = process.env.AGENT === 'ngrok' ? 'ngrok' : 'sdk';
/** Loopback source addresses the SDK agents' client processes take in turn (127.0.0.2, ...). */
const ADDRS = Math.max(1, Number(process.env.ADDRS ?? 1));
const MALLOC_INFO = process.env.MALLOC_INFO === '1';
/** The agents' heartbeat interval (the SDK's default is 10 s, as ngrok's agent's). */
const heartbeatInterval = Number(process.env.HEARTBEAT_MS ?? 10_000);
/** Seconds after the mass disconnect at which RSS and CPU are read (the last, then a full GC). */
const CLOSE_SAMPLES_S = (process.env.CLOSE_SAMPLES ?? '3,15').split(',').map(Number);
/** Sessions (or connections) opened at once. */
const BATCH = 50;
/** After a step, before idle CPU is read: handshakes done, first heartbeats and GCs over. */
const SETTLE_MS = 5000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

// ---- roles (child processes) -------------------------------------------------------------------

/**
 * Make this process's TLS connections leave from `address`. The SDK has no such option (agents
 * leave from wherever the host routes them); a run from one machine needs several source
 * addresses because the edge caps what one address holds.
 */
function bindSourceAddress(address: string): void {
  const connect = tls.connect;
  // The SDK calls tls.connect(options) on node:tls's exports object, which this replaces.
  (tls as { connect: (options: tls.ConnectionOptions) => tls.TLSSocket }).connect = (options) => {
    // tls.connect hands localAddress on to net.connect; its type leaves it out.
    const bound: tls.ConnectionOptions & { localAddress: string } = {
      ...options,
      localAddress: address,
    };
    return connect(bound);
  };
}

/** One agent session with an HTTP endpoint (unless TUNNELS=0); close() ends it. */
async function openAgent(spec: EdgeAddress): Promise<() => Promise<void>> {
  if (AGENT === 'ngrok') {
    const session = await connectNgrok(spec);
    if (TUNNELS) await session.httpEndpoint().scheme('HTTP').listenAndForward('http://127.0.0.1:9');
    return () => session.close();
  }
  const session: Session = await connectAgent(spec, { reconnect: false, heartbeatInterval });
  if (TUNNELS) await session.httpEndpoint({ scheme: 'http', forward: 9 });
  return () => session.close();
}

/** Agents: open `count` sessions, answer, and hold them until stdin ends. */
async function clientsRole(arg: {
  spec: EdgeAddress;
  count: number;
  from?: string;
}): Promise<void> {
  if (arg.from) bindSourceAddress(arg.from);
  // ngrok's native sessions hold no handle on Node's event loop; stdin (below) keeps it alive.
  const sessions: (() => Promise<void>)[] = [];
  for (let i = 0; i < arg.count; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, arg.count - i) }, async () => {
      sessions.push(await openAgent(arg.spec));
    });
    await Promise.all(batch);
  }
  say({ opened: sessions.length });
  process.stdin.resume();
  await once(process.stdin, 'end');
  await Promise.all(sessions.map((close) => close()));
  process.exit(0);
}

/** A local HTTP service behind one HTTP endpoint; answers with the endpoint's host name. */
async function serviceRole(arg: { spec: EdgeAddress; endpoints: number }): Promise<void> {
  const server = createServer((_req, res) => res.end('ok'));
  server.keepAliveTimeout = 600_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  const hosts: string[] = [];
  for (let i = 0; i < arg.endpoints; i++) {
    const session = await connectAgent(arg.spec, { reconnect: false });
    const endpoint = await session.httpEndpoint({ scheme: 'http', forward: `127.0.0.1:${port}` });
    hosts.push(new URL(endpoint.url!).host);
  }
  say({ hosts });
  process.stdin.resume();
  await once(process.stdin, 'end');
  process.exit(0);
}

// ---- measuring -----------------------------------------------------------------------------

/** User and system CPU time of `pid` so far, in ms (from /proc/<pid>/stat, 100 ticks a second). */
function cpuTimes(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10 };
}

/** The server's CPU per second over IDLE_S seconds, in ms, and the share spent in the kernel. */
async function idleCpu(edge: EdgeServer): Promise<number> {
  await sleep(SETTLE_MS);
  const cpu0 = cpuTimes(edge.pid);
  const t0 = performance.now();
  await sleep(IDLE_S * 1000);
  const cpu1 = cpuTimes(edge.pid);
  const seconds = (performance.now() - t0) / 1000;
  const user = (cpu1.user - cpu0.user) / seconds;
  const system = (cpu1.system - cpu0.system) / seconds;
  console.error(`  user ${fmt(user, 2)} ms/s, system ${fmt(system, 2)} ms/s`);
  return user + system;
}

/** One public keep-alive connection that has made one request through the endpoint at `host`. */
async function keepAliveConnection(port: number, host: string): Promise<Socket> {
  const socket = tcpConnect(port, '127.0.0.1');
  // A request that gets no answer fails the run rather than stalling it.
  socket.setTimeout(20_000, () => socket.destroy(new Error(`no answer through ${host}`)));
  await once(socket, 'connect');
  socket.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  // The service answers 'ok' with a Content-Length: once that arrives the response is whole.
  let text = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('latin1');
      if (!text.includes('\r\n\r\n') || !text.endsWith('ok')) return;
      socket.off('data', onData).off('error', reject);
      resolve();
    };
    socket.on('data', onData).once('error', reject);
  });
  if (!text.startsWith('HTTP/1.1 200')) throw new Error(`unexpected answer: ${text.slice(0, 80)}`);
  socket.setTimeout(0);
  // Keep reading so that a close by the edge is seen.
  socket.on('data', () => {}).on('error', () => {});
  return socket;
}

/** Fields of /proc/<pid>/smaps_rollup, in bytes (what of RSS is anonymous, i.e. the heaps). */
function smapsRollup(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').matchAll(
    /^(\w+):\s+(\d+) kB/gm,
  )) {
    out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

/** What glibc's allocator holds in the server (malloc_info), then whether malloc_trim(0) freed any. */
interface AllocatorFigures {
  /** Arenas (the main one and one per thread that allocated, up to 8 per core). */
  arenas: number;
  /** Bytes the arenas have from the system, and how much of it is free chunks. */
  system: number;
  free: number;
  /** Bytes in chunks mmap'd on their own (large allocations, returned when freed). */
  mmapped: number;
  trimmed: boolean;
}

/**
 * The allocator probe (bench/support/malloc-probe.c) built and preloaded into the server, with
 * its FIFO: the server's environment for MALLOC_INFO=1.
 */
function mallocProbe(): { env: Record<string, string>; fifo: string } {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-malloc-'));
  const lib = join(dir, 'malloc-probe.so');
  const source = join(REPO_ROOT, 'bench', 'support', 'malloc-probe.c');
  execFileSync('gcc', ['-shared', '-fPIC', '-O2', '-o', lib, source, '-lpthread']);
  const fifo = join(dir, 'probe');
  execFileSync('mkfifo', [fifo]);
  return { env: { LD_PRELOAD: lib, BURROW_MALLOC_PROBE: fifo }, fifo };
}

async function allocatorFigures(fifo: string): Promise<AllocatorFigures> {
  rmSync(`${fifo}.trim`, { force: true });
  writeFileSync(fifo, 't');
  while (!existsSync(`${fifo}.trim`)) await sleep(50);
  const xml = readFileSync(`${fifo}.xml`, 'utf8');
  // The totals over every arena close the document, after the last </heap>.
  const totals = xml.slice(xml.lastIndexOf('</heap>'));
  const size = (re: RegExp) => Number(re.exec(totals)?.[1] ?? 0);
  return {
    arenas: (xml.match(/<heap nr=/g) ?? []).length,
    system: size(/<system type="current" size="(\d+)"/),
    free:
      size(/<total type="fast" count="\d+" size="(\d+)"/) +
      size(/<total type="rest" count="\d+" size="(\d+)"/),
    mmapped: size(/<total type="mmap" count="\d+" size="(\d+)"/),
    trimmed: readFileSync(`${fifo}.trim`, 'utf8').trim() === '1',
  };
}

interface Row {
  count: number;
  cpuMsPerS: number;
  rss: number;
}

interface TreeResult {
  tree: string;
  baseCpu: number;
  /** Idle CPU of the empty server after the sessions closed (warm). */
  emptyCpu: number;
  baseRss: number;
  sessions: Row[];
  afterClose: {
    rss3s: number;
    rss15s: number;
    gcRss: number;
    heapUsed: number;
    /** Anonymous memory (the heaps: V8's, the allocator's) of RSS then, from smaps_rollup. */
    anonymous: number;
    allocator?: AllocatorFigures & { rssAfterTrim: number };
  };
  /** Idle CPU with the endpoints' sessions and no public connection. */
  connsBase: number;
  endpoints: number;
  conns: Row[];
  connsAfter: number;
}

const agentCap = Math.max(...SIZES) + 200;
const ingressCap = Math.max(500, ...CONNS) + 200;

async function measureTree(tree: string, root: string): Promise<TreeResult> {
  const roles = new RoleProcesses(import.meta.url);
  process.once('exit', () => roles.killAll('SIGKILL'));
  const children: ChildProcess[] = [];
  const probe = MALLOC_INFO ? mallocProbe() : undefined;
  const edge = await startEdgeServer({
    root,
    ...(probe && { env: probe.env }),
    // PROFILE=1: a CPU profile of the server, its path printed at the end.
    cpuProfile: process.env.PROFILE === '1',
    // What an operator sizing a node for this raises: the connection and session caps (the
    // defaults protect a small node), and the 60 s keep-alive timeout for idle connections.
    // Caps that say what the node is for: the open-files limit is then shared as they ask
    // (descriptor-budget.ts gives agents what the API and the ingress do not take).
    args: [
      ...['--keep-alive-timeout-ms', '3600000', '--agent-max-sessions-per-credential', '100000'],
      ...[
        '--agent-max-connections',
        String(agentCap),
        '--agent-max-connections-per-ip',
        String(agentCap),
      ],
      ...['--ingress-max-connections', String(ingressCap)],
      ...['--ingress-max-connections-per-ip', String(ingressCap)],
      ...['--api-max-connections', '100', '--api-max-connections-per-ip', '100'],
    ],
  });
  const spec = await edgeAddress(edge);
  // Warm the code paths (TLS, auth, bind) so the base figures hold them.
  const warm = await connectAgent(spec, { reconnect: false });
  await warm.httpEndpoint({ scheme: 'http', forward: 9 });
  await warm.close();
  const baseCpu = await idleCpu(edge);
  const baseRss = edge.rss();
  console.error(`[${tree}] base ${fmt(baseCpu, 2)} ms/s, RSS ${mib(baseRss)}`);

  const sessions: Row[] = [];
  let open = 0;
  for (const size of SIZES) {
    const started = performance.now();
    const spawns: Promise<unknown>[] = [];
    for (; open < size; open += Math.min(PER_CLIENT, size - open)) {
      const count = Math.min(PER_CLIENT, size - open);
      const from =
        ADDRS > 1 ? `127.0.0.${2 + ((children.length + spawns.length) % ADDRS)}` : undefined;
      spawns.push(
        roles.spawn('clients', { spec, count, from }, { stdin: 'pipe' }).then((c) => {
          children.push(c.proc);
        }),
      );
    }
    await Promise.all(spawns);
    const seconds = (performance.now() - started) / 1000;
    const cpuMsPerS = await idleCpu(edge);
    sessions.push({ count: size, cpuMsPerS, rss: edge.rss() });
    console.error(
      `[${tree}] ${size} sessions (step opened in ${fmt(seconds, 1)} s): ` +
        `${fmt(cpuMsPerS, 2)} ms/s, RSS ${mib(edge.rss())}`,
    );
  }
  // Mass disconnect: every agent closes its sessions at once.
  for (const child of children.splice(0)) child.stdin?.end();
  // How long the server takes to settle: its RSS and CPU at these seconds after the close.
  const afterCloseSeries: { at: number; rss: number; cpuMsPerS: number }[] = [];
  const closedAt = performance.now();
  let last = { t: closedAt, cpu: edge.cpuMs() };
  for (const at of CLOSE_SAMPLES_S) {
    await sleep(closedAt + at * 1000 - performance.now());
    const now = { t: performance.now(), cpu: edge.cpuMs() };
    const cpuMsPerS = (now.cpu - last.cpu) / ((now.t - last.t) / 1000);
    afterCloseSeries.push({ at, rss: edge.rss(), cpuMsPerS });
    console.error(`  ${at} s after closing: RSS ${mib(edge.rss())}, ${fmt(cpuMsPerS, 2)} ms/s`);
    last = now;
  }
  const rssAt = (at: number) => afterCloseSeries.find((x) => x.at === at)?.rss ?? 0;
  const rss3s = rssAt(3);
  const rss15s = rssAt(15);
  const gc = await edge.gcMemory();
  // The empty server again, now warm: right after start its base still carries start-up work.
  const emptyCpu = await idleCpu(edge);
  console.error(`[${tree}] empty again: ${fmt(emptyCpu, 2)} ms/s`);
  const anonymous = smapsRollup(edge.pid).Anonymous ?? 0;
  const figures = probe ? await allocatorFigures(probe.fifo) : undefined;
  const allocator = figures && { ...figures, rssAfterTrim: edge.rss() };
  const afterClose = { rss3s, rss15s, gcRss: gc.rss, heapUsed: gc.heapUsed, anonymous, allocator };
  console.error(
    `[${tree}] after closing: ${mib(rss3s)}, 15 s: ${mib(rss15s)}, GC ${mib(gc.rss)} ` +
      `(anonymous ${mib(anonymous)})` +
      (allocator
        ? `; malloc: ${allocator.arenas} arenas, ${mib(allocator.system)} from the system, ` +
          `${mib(allocator.free)} free, ${mib(allocator.mmapped)} mmapped; ` +
          `after malloc_trim(0): ${mib(allocator.rssAfterTrim)}`
        : ''),
  );
  for (const proc of roles.children) if (proc.exitCode === null) proc.kill('SIGTERM');

  const endpoints = Math.ceil(Math.max(0, ...CONNS) / CONNS_PER_ENDPOINT);
  const service = await roles.spawn<{ hosts: string[] }>(
    'service',
    { spec, endpoints },
    { stdin: 'pipe' },
  );
  const hosts = service.reply.hosts;
  const connsBase = await idleCpu(edge);
  const sockets: Socket[] = [];
  const conns: Row[] = [];
  for (const size of CONNS) {
    while (sockets.length < size) {
      const n = Math.min(BATCH, size - sockets.length);
      const batch = Array.from({ length: n }, (_, i) =>
        keepAliveConnection(edge.httpPort, hosts[(sockets.length + i) % hosts.length]!),
      );
      sockets.push(...(await Promise.all(batch)));
    }
    const cpuMsPerS = await idleCpu(edge);
    const alive = sockets.filter((s) => !s.destroyed).length;
    conns.push({ count: alive, cpuMsPerS, rss: edge.rss() });
    console.error(`[${tree}] ${alive} keep-alive connections: ${fmt(cpuMsPerS, 2)} ms/s`);
  }
  for (const s of sockets) s.destroy();
  await sleep(3000);
  const connsAfter = edge.rss();
  service.proc.stdin?.end();
  for (const proc of roles.children) if (proc.exitCode === null) proc.kill('SIGTERM');
  const profile = await edge.stop();
  if (profile) console.error(`[${tree}] CPU profile: ${profile}`);
  return {
    ...{ tree, baseCpu, emptyCpu, baseRss, sessions, afterClose },
    ...{ connsBase, endpoints, conns, connsAfter },
  };
}

function report(results: TreeResult[]): void {
  const us = (ms: number, n: number) => fmt((ms * 1000) / n, 2);
  console.log(
    `\nIdle ${AGENT === 'ngrok' ? '@ngrok/ngrok' : 'SDK'} sessions (${TUNNELS ? 'one HTTP endpoint each' : 'no endpoints'}), burrow server ` +
      `CPU over ${IDLE_S} s per step (at 0: the empty server before the sessions / after they ` +
      `closed); ${machine()}.\n`,
  );
  const header = ['tree', 'sessions', 'server CPU ms/s', 'above base, µs/s per session', 'RSS'];
  const rows: string[][] = [];
  for (const r of results) {
    // The base is the lower of the empty server's two readings (before the sessions, after).
    const base = Math.min(r.baseCpu, r.emptyCpu);
    rows.push([r.tree, '0', `${fmt(r.baseCpu, 2)} / ${fmt(r.emptyCpu, 2)}`, '', mib(r.baseRss)]);
    for (const s of r.sessions) {
      const above = Math.max(0, s.cpuMsPerS - base);
      rows.push([r.tree, fmt(s.count), fmt(s.cpuMsPerS, 2), us(above, s.count), mib(s.rss)]);
    }
  }
  console.log(markdownTable(header, rows));
  console.log('\nAfter every session closed at once (RSS from /proc; heap after a full GC):\n');
  console.log(
    markdownTable(
      ['tree', 'base', 'peak', '3 s later', '15 s later', 'after GC', 'heap used', 'anonymous'],
      results.map((r) => {
        const peak = Math.max(...r.sessions.map((s) => s.rss));
        const a = r.afterClose;
        return [
          r.tree,
          mib(r.baseRss),
          mib(peak),
          mib(a.rss3s),
          mib(a.rss15s),
          mib(a.gcRss),
        ].concat(mib(a.heapUsed), mib(a.anonymous));
      }),
    ),
  );
  if (results.some((r) => r.afterClose.allocator)) {
    console.log('\nglibc malloc then (malloc_info), and RSS after malloc_trim(0):\n');
    console.log(
      markdownTable(
        ['tree', 'arenas', 'from the system', 'free in arenas', 'mmapped', 'RSS after trim'],
        results.flatMap((r) => {
          const m = r.afterClose.allocator;
          if (!m) return [];
          const cells = [String(m.arenas), mib(m.system), mib(m.free), mib(m.mmapped)];
          return [[r.tree, ...cells, mib(m.rssAfterTrim)]];
        }),
      ),
    );
  }
  console.log(
    `\nIdle public HTTP/1.1 keep-alive connections, ${CONNS_PER_ENDPOINT} per endpoint ` +
      '(each has made one request):\n',
  );
  const connRows: string[][] = [];
  for (const r of results) {
    connRows.push([r.tree, `0 (${r.endpoints} endpoint sessions)`, fmt(r.connsBase, 2), '', '']);
    for (const c of r.conns) {
      const above = Math.max(0, c.cpuMsPerS - r.connsBase);
      connRows.push([r.tree, fmt(c.count), fmt(c.cpuMsPerS, 2), us(above, c.count), mib(c.rss)]);
    }
    connRows.push([r.tree, 'closed, 3 s later', '', '', mib(r.connsAfter)]);
  }
  console.log(
    markdownTable(
      ['tree', 'connections', 'server CPU ms/s', 'above base, µs/s per connection', 'RSS'],
      connRows,
    ),
  );
}

const role = process.argv[2];
if (role === 'clients') await clientsRole(JSON.parse(process.argv[3]!) as never);
else if (role === 'service') await serviceRole(JSON.parse(process.argv[3]!) as never);
else {
  exitOnSignals();
  const trees = (process.env.TREES ?? `this=${REPO_ROOT}`).split(',').map((t) => t.split('='));
  const results: TreeResult[] = [];
  for (const [tree, root] of trees) results.push(await measureTree(tree!, root!));
  report(results);
  process.exit(0);
}
