/**
 * Idle public TCP connections through one TCP endpoint (issue 35): a real `burrow server` on
 * SQLite, one reserved TCP address served by `SESSIONS` SDK agent sessions that pool it, and
 * public connections opened in steps up to each of `CONNS`, each making one round trip to an echo
 * service behind the agents and then left idle. At each step: the server's CPU per second over
 * `IDLE_S` seconds (user + system from /proc) and its RSS; at the end all close at once.
 *
 * One agent session proxies at most 400 connections at once (`maxProxyStreams` in
 * agent-session.ts; more wait up to 10 s, then fail), so an endpoint holding 10,000 is served by
 * several sessions that pool it, as ngrok's endpoint pooling does. `SESSIONS=1` shows the cap:
 * connections beyond it are counted as failed rather than failing the run.
 *
 * Descriptors: each public connection holds one in the server, one here, one in an agent process
 * (to the service) and one in the service; agents and the service run in child processes of their
 * own, and the public connections leave from `ADDRS` loopback addresses in turn (the edge caps
 * what one address holds at half the ingress's share of its open files).
 *
 *   npm run build && npm run bench:idle-tcp
 *   SESSIONS=1 CONNS=1000 npm run bench:idle-tcp
 */
import { once } from 'node:events';
import { createServer, connect as tcpConnect, type Socket } from 'node:net';
import { startEdgeServer, type EdgeServer } from './edge-process.js';
import { fmt, machine, markdownTable, mib } from './report.js';
import { exitOnSignals, RoleProcesses } from './support/roles.js';
import { connectAgent, edgeAddress, type EdgeAddress } from './support/sdk-agent.js';

const CONNS = (process.env.CONNS ?? '1000,2500,5000,10000').split(',').map(Number);
const SESSIONS = Number(process.env.SESSIONS ?? 40);
/** Agent sessions per agent process (each holds a descriptor per proxied connection). */
const PER_AGENT_PROCESS = 10;
const IDLE_S = Number(process.env.IDLE_S ?? 20);
const ADDRS = Math.max(1, Number(process.env.ADDRS ?? 2));
const BATCH = 50;
/** After a step, before idle CPU is read: handshakes done, first GCs over. */
const SETTLE_MS = 5000;
/** A round trip not answered by then counts as failed (a session waits 10 s for a free stream). */
const ROUND_TRIP_MS = 15_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

// ---- roles (child processes) -------------------------------------------------------------------

/** A TCP echo service that holds every connection open. */
async function serviceRole(): Promise<void> {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  server.maxConnections = 100_000;
  server.listen(0, '127.0.0.1', 4096);
  await once(server, 'listening');
  say({ port: (server.address() as { port: number }).port });
}

/** `count` agent sessions pooling the reserved TCP address `addr`, forwarding to the service. */
async function agentsRole(arg: {
  spec: EdgeAddress;
  addr: string;
  count: number;
  service: number;
}): Promise<void> {
  for (let i = 0; i < arg.count; i++) {
    const session = await connectAgent(arg.spec, { reconnect: false });
    await session.tcpEndpoint({
      addr: arg.addr,
      poolingEnabled: true,
      forward: `127.0.0.1:${arg.service}`,
    });
  }
  say({ sessions: arg.count });
  process.stdin.resume();
  await once(process.stdin, 'end');
  process.exit(0);
}

// ---- measuring ---------------------------------------------------------------------------------

/** User + system CPU of `edge` per second over IDLE_S seconds, in ms. */
async function idleCpu(edge: EdgeServer): Promise<number> {
  await sleep(SETTLE_MS);
  const cpu0 = edge.cpuMs();
  const t0 = performance.now();
  await sleep(IDLE_S * 1000);
  return (edge.cpuMs() - cpu0) / ((performance.now() - t0) / 1000);
}

/** A public connection that has made one round trip through the endpoint, or undefined. */
async function idleConnection(port: number, from: string): Promise<Socket | undefined> {
  const socket = tcpConnect({ port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => {});
  socket.setTimeout(ROUND_TRIP_MS, () => socket.destroy());
  const answered = new Promise<boolean>((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text === 'ping') resolve(true);
    });
    socket.once('close', () => resolve(false));
  });
  socket.write('ping');
  if (!(await answered)) return undefined;
  socket.setTimeout(0);
  return socket;
}

/** The address `host:port` of a new reserved TCP address (POST /reserved_addrs). */
async function reserveAddr(edge: EdgeServer): Promise<string> {
  const res = await fetch(`${edge.apiUrl}/reserved_addrs`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${edge.apiKey}`,
      'Content-Type': 'application/json',
      'Ngrok-Version': '2',
    },
    body: JSON.stringify({ description: 'idle-tcp bench' }),
  });
  if (res.status !== 201)
    throw new Error(`POST /reserved_addrs: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { addr: string }).addr;
}

interface Step {
  target: number;
  open: number;
  failed: number;
  cpuMsPerS: number;
  rss: number;
}

async function main(): Promise<void> {
  exitOnSignals();
  const roles = new RoleProcesses(import.meta.url);
  process.once('exit', () => roles.killAll('SIGKILL'));
  const maxConns = Math.max(...CONNS);
  const edge = await startEdgeServer({
    // A node for public connections: the ingress gets what the agents and the API do not take.
    args: [
      ...['--ingress-max-connections', String(maxConns + 500)],
      ...['--ingress-max-connections-per-ip', String(maxConns + 500)],
      ...['--agent-max-connections', String(SESSIONS + 100), '--api-max-connections', '100'],
      ...['--agent-max-sessions-per-credential', String(SESSIONS + 100)],
    ],
  });
  const spec = await edgeAddress(edge);
  const addr = await reserveAddr(edge);
  const port = Number(addr.slice(addr.lastIndexOf(':') + 1));
  const service = await roles.start<{ port: number }>('service');
  const emptyCpu = await idleCpu(edge);
  const agents: Promise<unknown>[] = [];
  for (let at = 0; at < SESSIONS; at += PER_AGENT_PROCESS) {
    const count = Math.min(PER_AGENT_PROCESS, SESSIONS - at);
    agents.push(
      roles.spawn('agents', { spec, addr, count, service: service.port }, { stdin: 'pipe' }),
    );
  }
  await Promise.all(agents);
  const baseCpu = await idleCpu(edge);
  const baseRss = edge.rss();
  console.error(
    `empty ${fmt(emptyCpu, 2)} ms/s; ${SESSIONS} sessions on ${addr}: ` +
      `${fmt(baseCpu, 2)} ms/s, RSS ${mib(baseRss)}`,
  );
  const sockets: Socket[] = [];
  const steps: Step[] = [];
  let failed = 0;
  let attempted = 0;
  for (const target of CONNS) {
    const started = performance.now();
    while (attempted < target) {
      const n = Math.min(BATCH, target - attempted);
      const batch = Array.from({ length: n }, (_, i) =>
        idleConnection(port, `127.0.0.${1 + ((attempted + i) % ADDRS)}`),
      );
      attempted += n;
      for (const socket of await Promise.all(batch)) {
        if (socket) sockets.push(socket);
        else failed++;
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const cpuMsPerS = await idleCpu(edge);
    const open = sockets.filter((s) => !s.destroyed).length;
    steps.push({ target, open, failed, cpuMsPerS, rss: edge.rss() });
    console.error(
      `${target} attempted (step in ${fmt(seconds, 1)} s): ${open} open, ${failed} failed, ` +
        `${fmt(cpuMsPerS, 2)} ms/s, RSS ${mib(edge.rss())}`,
    );
  }
  for (const s of sockets) s.destroy();
  await sleep(3000);
  const closedRss = edge.rss();
  await edge.stop();

  console.log(
    `\nIdle public TCP connections through one TCP endpoint pooled by ${SESSIONS} SDK ` +
      `session(s), burrow server CPU over ${IDLE_S} s per step; ${machine()}.\n` +
      `Empty server ${fmt(emptyCpu, 2)} ms/s; with the sessions ${fmt(baseCpu, 2)} ms/s, ` +
      `RSS ${mib(baseRss)}.\n`,
  );
  const rows = steps.map((s) => [
    fmt(s.target),
    fmt(s.open),
    fmt(s.failed),
    fmt(s.cpuMsPerS, 2),
    s.open > 0 ? fmt((Math.max(0, s.cpuMsPerS - baseCpu) * 1000) / s.open, 3) : '',
    mib(s.rss),
    s.open > 0 ? `${fmt((s.rss - baseRss) / 1024 / s.open, 1)} KiB` : '',
  ]);
  rows.push(['all closed, 3 s later', '', '', '', '', mib(closedRss), '']);
  console.log(
    markdownTable(
      [
        'connections tried',
        'open',
        'failed',
        'server CPU ms/s',
        'above base, µs/s each',
        'RSS',
        'RSS each',
      ],
      rows,
    ),
  );
  roles.killAll('SIGTERM');
  process.exit(0);
}

const role = process.argv[2];
if (role === 'service') await serviceRole();
else if (role === 'agents') await agentsRole(JSON.parse(process.argv[3]!) as never);
else await main();
