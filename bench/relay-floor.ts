/**
 * The floor under issue 29's targets: what the least a Node edge can do per request costs on this
 * machine, measured in the same run as Burrow's edge.
 *
 *   npm run build && npm run bench:relay-floor
 *   AGENTS=sdk,ngrok ROUNDS=6 DURATION=4 npm run bench:relay-floor
 *
 * The floor edge does only the input and output any tunnel edge must: it reads the public socket,
 * frames the bytes (stream id and length, 8 bytes) onto one TLS connection to its agent, reads the
 * agent's frames back and writes each to its public socket. Writes to the agent are gathered per
 * event-loop turn (one TLS write for all the frames of a turn, as Burrow's muxado writer does). No
 * HTTP parsing, routing, policy, inspector, metrics, flow control or stream objects. Its agent does
 * the same on the other side, with one service connection per public connection. Both run in
 * their own processes with Burrow's own TLS defaults (Node's: TLS 1.3, AES-GCM).
 *
 * Alternated rounds (the order reversed every other round) of `wrk` (1 thread, 50 connections,
 * 12-byte answers) against the service alone, the floor, and Burrow's edge with each agent of
 * AGENTS. Printed: each path's rate as a share of the service alone (its own run just before),
 * the edge's and the agent's CPU per request, from /proc; at the end the medians.
 *
 * Bulk has no floor here: a relay this naive spends more per GB than Burrow's edge, whose reads
 * are lent slabs. The floor for bulk is Node's TLS alone: `ONLY=tls PATHS=raw npm run bench:mux`
 * (a receiver that only counts the bytes).
 */
import net from 'node:net';
import { loadavg } from 'node:os';
import tls from 'node:tls';
import { processCpuMs, startEdgeServer } from './edge-process.js';
import { machine, markdownTable } from './report.js';
import { serveNgrok, serveSdk, type AgentSpec } from './support/agent-roles.js';
import { startBulkService, type ServicePorts } from './support/bulk.js';
import { ioCalls, median } from './support/load.js';
import { answer, exitOnSignals, RoleProcesses, runRoles } from './support/roles.js';
import { edgeAddress } from './support/sdk-agent.js';
import { wrk } from './support/wrk.js';
import { selfSignedCert } from '../test/support/mux.js';

const roles = new RoleProcesses(import.meta.url);
const keepAlive = (port: number, host: string, seconds: number) =>
  wrk({ port, host, connections: 50, seconds });
const AGENTS = (process.env.AGENTS ?? 'sdk,ngrok').split(',').filter(Boolean);
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const DURATION = Number(process.env.DURATION ?? 4);
const HEADER = 8;
/** A payload this large is written at once, not gathered with the turn's other frames. */
const BULK = 16 * 1024;
/** A frame of length 0 ends its stream. */
const END = 0;

/**
 * Frames in both directions over one socket: `send` gathers a turn's frames into one write;
 * `onPiece` is called with each stream's bytes as they are read (a frame's payload may come in
 * pieces, passed on without being gathered), and with `undefined` when the stream ends. The least
 * a multiplexer can do.
 */
function frameLink(
  link: tls.TLSSocket,
  onPiece: (id: number, piece: Buffer | undefined) => void,
): (id: number, payload: Buffer) => void {
  let queued: Buffer[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (queued.length === 0) return;
    const out = queued.length === 1 ? queued[0]! : Buffer.concat(queued);
    queued = [];
    link.write(out);
  };
  let header: Buffer | undefined; // a header split across reads
  let id = 0;
  let left = 0; // payload bytes of the current frame still to come
  link.on('data', (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (left > 0) {
        const piece = chunk.subarray(at, at + left);
        left -= piece.length;
        at += piece.length;
        onPiece(id, piece);
        continue;
      }
      let head = chunk.subarray(at, at + HEADER);
      if (header) head = Buffer.concat([header, chunk.subarray(at, at + HEADER - header.length)]);
      if (head.length < HEADER) {
        header = head;
        return;
      }
      at += header ? HEADER - header.length : HEADER;
      header = undefined;
      id = head.readUInt32BE(0);
      left = head.readUInt32BE(4);
      if (left === END) onPiece(id, undefined);
    }
  });
  return (to, payload) => {
    const head = Buffer.allocUnsafe(HEADER);
    head.writeUInt32BE(to, 0);
    head.writeUInt32BE(payload.length, 4);
    queued.push(head, payload);
    // Bulk goes out at once (one TLS write per read of the service); small frames wait for the
    // end of the turn, so that a turn's answers share one write.
    if (payload.length >= BULK) return flush();
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}

/** Pause `source` while `link` is full (coarse: every waiting source resumes on one 'drain'). */
function pauseWhileFull(link: tls.TLSSocket, source: net.Socket): void {
  if (!link.writableNeedDrain) return;
  source.pause();
  link.once('drain', () => source.resume());
}

/** The floor edge: a public listener and a TLS listener for its one agent. */
async function floorEdge(): Promise<void> {
  const { key, cert } = selfSignedCert();
  const streams = new Map<number, net.Socket>();
  let send: ((id: number, payload: Buffer) => void) | undefined;
  let agent: tls.TLSSocket | undefined;
  const agents = tls.createServer({ key, cert }, (link) => {
    link.setNoDelay(true);
    agent = link;
    send = frameLink(link, (id, payload) => {
      const socket = streams.get(id);
      if (!socket) return;
      if (payload === undefined) return void socket.end();
      if (!socket.write(payload)) {
        // Until this client takes the bytes, or leaves (a drain never comes to a closed socket).
        link.pause();
        const resume = (): void => {
          socket.off('drain', resume).off('close', resume);
          link.resume();
        };
        socket.once('drain', resume).once('close', resume);
      }
    });
  });
  let nextId = 1;
  const public_ = net.createServer((socket) => {
    socket.setNoDelay(true);
    const id = nextId++;
    streams.set(id, socket);
    socket.on('data', (chunk: Buffer) => {
      send!(id, chunk);
      pauseWhileFull(agent!, socket);
    });
    socket.on('close', () => {
      streams.delete(id);
      send?.(id, Buffer.alloc(END));
    });
    socket.on('error', () => undefined);
  });
  agents.listen(0, '127.0.0.1');
  public_.listen(0, '127.0.0.1');
  await Promise.all([
    new Promise((r) => agents.once('listening', r)),
    new Promise((r) => public_.once('listening', r)),
  ]);
  const port = (s: net.Server): number => (s.address() as net.AddressInfo).port;
  answer({
    pid: process.pid,
    agentPort: port(agents),
    httpPort: port(public_),
    cert: String(cert),
  });
}

/** The floor agent: one service connection per stream the edge opens. */
async function floorAgent(arg: unknown): Promise<void> {
  const { agentPort, cert, service } = arg as { agentPort: number; cert: string; service: number };
  const link = tls.connect({ port: agentPort, host: '127.0.0.1', ca: cert });
  await new Promise((r) => link.once('secureConnect', r));
  link.setNoDelay(true);
  const streams = new Map<number, net.Socket>();
  const send = frameLink(link, (id, payload) => {
    let socket = streams.get(id);
    if (payload === undefined) {
      socket?.end();
      streams.delete(id);
      return;
    }
    if (!socket) {
      const opened = net.connect({ port: service, host: '127.0.0.1', noDelay: true });
      streams.set(id, opened);
      opened.on('data', (chunk: Buffer) => {
        send(id, chunk);
        pauseWhileFull(link, opened);
      });
      opened.on('end', () => send(id, Buffer.alloc(END)));
      opened.on('error', () => undefined);
      socket = opened;
    }
    socket.write(payload);
  });
  answer({ pid: process.pid });
}

/** A path through an edge: where to send requests, and whose CPU to count. */
interface Path {
  name: string;
  port: number;
  host: string;
  edgePid: number;
  agentPid: number;
}

interface Sample {
  ratio: number;
  edge: number;
  agent: number;
  /** The edge's read and write system calls per request (/proc/<pid>/io). */
  reads: number;
  writes: number;
}

/** wrk on the service alone, then on `path`: the ratio, and CPU µs per request from /proc. */
async function measure(path: Path, service: number): Promise<Sample> {
  const direct = await keepAlive(service, 'localhost', DURATION);
  const edge = processCpuMs(path.edgePid);
  const agent = processCpuMs(path.agentPid);
  const io = ioCalls(path.edgePid);
  const run = await keepAlive(path.port, path.host, DURATION);
  const perRequest = (ms: number): number => (ms * 1000) / run.requests;
  const ioAfter = ioCalls(path.edgePid);
  return {
    ratio: run.rate / direct.rate,
    edge: perRequest(processCpuMs(path.edgePid) - edge),
    agent: perRequest(processCpuMs(path.agentPid) - agent),
    reads: (ioAfter.reads - io.reads) / run.requests,
    writes: (ioAfter.writes - io.writes) / run.requests,
  };
}

async function main(): Promise<void> {
  const service = await roles.start<ServicePorts>('service');
  const floor = await roles.start<{
    pid: number;
    agentPort: number;
    httpPort: number;
    cert: string;
  }>('floor-edge');
  const floorAgentPid = (
    await roles.start<{ pid: number }>('floor-agent', { ...floor, service: service.http })
  ).pid;
  const paths: Path[] = [
    { name: 'floor', port: floor.httpPort, host: 'x', edgePid: floor.pid, agentPid: floorAgentPid },
  ];
  for (const agent of AGENTS) {
    const edge = await startEdgeServer({});
    const spec: AgentSpec = { ...(await edgeAddress(edge)), service };
    const started = await roles.start<{ pid: number; http: string }>(agent, spec);
    const host = new URL(started.http).hostname;
    paths.push({
      name: `burrow, ${agent}`,
      port: edge.httpPort,
      host,
      edgePid: edge.pid,
      agentPid: started.pid,
    });
  }
  const load = loadavg()[0]!.toFixed(1);
  for (const path of paths) await keepAlive(path.port, path.host, 2);
  const samples = new Map<Path, Sample[]>(paths.map((p) => [p, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const path of round % 2 === 1 ? paths : [...paths].reverse()) {
      const sample = await measure(path, service.http);
      samples.get(path)!.push(sample);
      console.log(
        `keep-alive round ${round}, ${path.name}: ${sample.ratio.toFixed(2)} of direct, ` +
          `edge ${sample.edge.toFixed(1)} µs/request, agent ${sample.agent.toFixed(1)} µs/request, ` +
          `edge reads/writes per request ${sample.reads.toFixed(2)}/${sample.writes.toFixed(2)}`,
      );
    }
  }
  const med = (of: Sample[], key: keyof Sample, digits: number): string =>
    median(of.map((s) => s[key])).toFixed(digits);
  console.log(
    `\nRelay floor, ${machine()}, load average ${load} at the start; medians of ${ROUNDS} ` +
      `keep-alive rounds (${DURATION} s, 50 connections).\n`,
  );
  console.log(
    markdownTable(
      [
        'path',
        'keep-alive, of direct',
        'edge µs/request',
        'agent µs/request',
        'edge reads, writes',
      ],
      paths.map((p) => {
        const k = samples.get(p)!;
        const io = `${med(k, 'reads', 2)}, ${med(k, 'writes', 2)}`;
        return [p.name, med(k, 'ratio', 2), med(k, 'edge', 1), med(k, 'agent', 1), io];
      }),
    ),
  );
}

exitOnSignals();
runRoles(roles, {
  main,
  service: () => startBulkService().then(answer),
  'floor-edge': () => floorEdge(),
  'floor-agent': (arg) => floorAgent(arg),
  sdk: (arg) => serveSdk(arg as AgentSpec),
  ngrok: (arg) => serveNgrok(arg as AgentSpec),
});
