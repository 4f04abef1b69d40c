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
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { fmt, markdownTable } from './report.js';
import { httpDownload, MIB, startBulkService, tcpBulk, type ServicePorts } from './support/bulk.js';
import { answer, fail, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge } from './support/sdk-agent.js';

const MB = Number(process.env.MB ?? 256);
const RTT_MB = Number(process.env.RTT_MB ?? 48);
const RUNS = Number(process.env.RUNS ?? 3);
const ONE_WAY_MS = 25;

// ---- the edge (child) and an SDK agent (child) -------------------------------------------

type EdgeInfo = Awaited<ReturnType<typeof startBenchEdge>>['info'];

async function serveAgent(spec: {
  edge: EdgeInfo;
  service: ServicePorts;
  window: Window;
}): Promise<void> {
  const session = await connectAgent(spec.edge, { window: spec.window });
  const tcp = await session.tcpEndpoint({ forward: spec.service.tcp });
  const web = await session.httpEndpoint({ scheme: 'http', forward: spec.service.http });
  answer({ tcp: tcp.url, http: web.url });
}

// ---- the public client and the report (this process) ------------------------------------

type Window = 'large' | 'standard';
interface AgentInfo {
  tcp: string;
  http: string;
}

const roles = new RoleProcesses(import.meta.url);

type Direction = 'tcp download' | 'tcp upload' | 'http download';

/** One transfer of `bytes` through `port` (TCP) or the ingress (HTTP); MiB/s. */
function transfer(
  direction: Direction,
  port: number,
  host: string,
  bytes: number,
): Promise<number> {
  if (direction === 'http download') return httpDownload(port, host, bytes);
  return tcpBulk(port, direction === 'tcp download' ? 'down' : 'up', bytes);
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
  const service = await roles.start<ServicePorts>('service');
  const edge = await roles.start<EdgeInfo>('edge');
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
    large: await roles.start<AgentInfo>('agent', {
      edge: { ...edge, serverAddr },
      service,
      window: 'large',
    }),
    standard: await roles.start<AgentInfo>('agent', {
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
    roles.killAll();
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
if (role === 'service') startBulkService().then(answer, fail);
else if (role === 'edge') startBenchEdge().then(({ info }) => answer(info), fail);
else if (role === 'agent') {
  serveAgent(JSON.parse(process.argv[3]!) as Parameters<typeof serveAgent>[0]).catch(fail);
} else await main();
