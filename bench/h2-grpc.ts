/**
 * HTTP/2 and gRPC through the edge (issue 28), each against the same service reached directly, in
 * the same run:
 *
 * - h2 keep-alive: h2load (Debian's nghttp2-client) with CLIENTS connections of STREAMS streams
 *   each, against an h2c service directly and through the HTTPS port (TLS, h2) to an endpoint bound
 *   with app protocol http2 (Burrow's SDK agent), which the edge speaks h2c to; both through a
 *   Unix-socket relay process (serveRelay).
 * - h2 to an HTTP/1.1 service: h2load over TLS and h2 to an endpoint bound without an app
 *   protocol (the edge sends HTTP/1.1 on the tunnel stream: the lean relay's pipeline,
 *   h2-exchange.ts), against h2load speaking HTTP/1.1 (`--h1`) to the same service directly; and,
 *   for comparison, h2load `--h1` through the edge to that endpoint.
 * - HTTP/1.1 to an h2c service: h2load `--h1` through the edge to the endpoint bound with app
 *   protocol http2 (each request an HTTP/2 call to the service: h2-bridge.ts), against h2load
 *   speaking h2 to that service directly.
 * - gRPC unary: a @grpc/grpc-js client keeping CALLS calls in flight for DURATION seconds, directly
 *   and through the edge.
 *
 *   node --import tsx bench/h2-grpc.ts
 *   DURATION=5 CLIENTS=10 STREAMS=10 CALLS=50 ROUNDS=3 node --import tsx bench/h2-grpc.ts
 *
 * Processes: the edge, the agent, the services (h2c and gRPC), one gRPC load process per run,
 * h2load, and this process. Rounds alternate direct and through the edge; medians are printed.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:http2';
import { connect as connectTcp, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { fmt, machine, markdownTable } from './report.js';
import { median } from './support/load.js';
import { answer, RoleProcesses, runRoles } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CLIENTS = Number(process.env.CLIENTS ?? 10);
const STREAMS = Number(process.env.STREAMS ?? 10);
const CALLS = Number(process.env.CALLS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const bytes = (b: Buffer): Buffer => b;
const ECHO = {
  echo: {
    path: '/bench.Echo/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: bytes,
    requestDeserialize: bytes,
    responseSerialize: bytes,
    responseDeserialize: bytes,
  },
} satisfies grpc.ServiceDefinition;

type EchoClient = { echo(m: Buffer, cb: grpc.requestCallback<Buffer>): grpc.ClientUnaryCall };
type EdgeInfo = EdgeAddress & { httpsPort: number };
interface Services {
  h2: number;
  h1: number;
  grpc: number;
}
interface Hosts {
  h2: string;
  h1: string;
  grpc: string;
}

async function serveEdge(): Promise<void> {
  const { edge, info } = await startBenchEdge();
  answer({ ...info, httpsPort: edge.httpsPort });
}

async function serveServices(): Promise<void> {
  const h2 = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve));
  const h1 = createHttpServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => h1.listen(0, '127.0.0.1', resolve));
  const server = new grpc.Server();
  server.addService(ECHO, {
    echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
      cb(null, call.request),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const portOf = (s: { address(): unknown }): number => (s.address() as { port: number }).port;
  answer({ h2: portOf(h2), h1: portOf(h1), grpc: port });
}

async function serveAgent(spec: { edge: EdgeInfo; services: Services }): Promise<void> {
  const session = await connectAgent(spec.edge);
  const h2 = await session.httpEndpoint({ appProtocol: 'http2', forward: spec.services.h2 });
  const h1 = await session.httpEndpoint({ forward: spec.services.h1 });
  const rpc = await session.httpEndpoint({ appProtocol: 'http2', forward: spec.services.grpc });
  const hostOf = (e: { url?: string | undefined }): string => new URL(e.url!).hostname;
  answer({ h2: hostOf(h2), h1: hostOf(h1), grpc: hostOf(rpc) });
}

/** The grpc load role: CALLS unary calls in flight for DURATION s; answers calls per second. */
async function grpcLoad(spec: { target: string; host?: string; ca?: string }): Promise<void> {
  const Client = grpc.makeGenericClientConstructor(ECHO, 'Echo');
  const client = spec.host
    ? new Client(spec.target, grpc.credentials.createSsl(Buffer.from(spec.ca!)), {
        'grpc.ssl_target_name_override': spec.host,
        'grpc.default_authority': spec.host,
      })
    : new Client(spec.target, grpc.credentials.createInsecure());
  const call = (): Promise<void> =>
    new Promise((resolve, reject) =>
      (client as unknown as EchoClient).echo(Buffer.from('ping'), (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  // Warm up: the connection, the JIT.
  for (let i = 0; i < 200; i++) await call();
  let done = 0;
  let errors = 0;
  const until = Date.now() + DURATION * 1000;
  const worker = async (): Promise<void> => {
    while (Date.now() < until) {
      await call().then(
        () => done++,
        () => errors++,
      );
    }
  };
  await Promise.all(Array.from({ length: CALLS }, worker));
  client.close();
  answer({ rate: done / DURATION, errors });
}

/**
 * The relay role: a Unix socket at `path` relaying to 127.0.0.1:`port`. h2load takes its Host,
 * `:authority` and SNI from the URL and connects to the socket its `-B unix:` names, so the edge's
 * names need no DNS; the direct run goes through such a relay too, so both pay the same hop.
 */
async function serveRelay(spec: { path: string; port: number }): Promise<void> {
  rmSync(spec.path, { force: true });
  const server = createNetServer((client) => {
    const upstream = connectTcp(spec.port, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(spec.path, resolve));
  answer({ path: spec.path });
}

/**
 * Requests per second h2load measured at `url` through the Unix socket `socket`, and failures;
 * over HTTP/1.1 (keep-alive, one request at a time per connection) with `h1`.
 */
function h2load(
  url: string,
  socket: string,
  h1 = false,
): Promise<{ rate: number; errors: number }> {
  const args = [
    ...(h1 ? ['--h1'] : []),
    ...['-D', String(DURATION), '--warm-up-time', '1'],
    ...['-c', String(h1 ? CLIENTS * STREAMS : CLIENTS), '-m', String(h1 ? 1 : STREAMS)],
    ...['-B', `unix:${socket}`],
    url,
  ];
  return new Promise((resolve, reject) =>
    execFile('h2load', args, (err, out) => {
      if (err) return reject(new Error(`h2load failed: ${err.message}`));
      const rate = /finished in [^,]+, ([\d.]+) req\/s/.exec(out);
      const failed = /requests: .* (\d+) failed/.exec(out);
      const ok = /status codes: (\d+) 2xx/.exec(out);
      if (!rate || !ok) return reject(new Error(`h2load printed no rate: ${out}`));
      // A run whose answers are not 2xx measured something else (an error page).
      if (Number(ok[1]) === 0) return reject(new Error(`h2load got no 2xx: ${out}`));
      resolve({ rate: Number(rate[1]), errors: Number(failed?.[1] ?? 0) });
    }),
  );
}

const roles = new RoleProcesses(import.meta.url);

async function main(): Promise<void> {
  const edge = await roles.start<EdgeInfo>('edge');
  const services = await roles.start<Services>('services');
  const hosts = await roles.start<Hosts>('agent', { edge, services });
  const ca = readFileSync(edge.caFile, 'utf8');
  const dir = mkdtempSync(join(tmpdir(), 'burrow-bench-h2-'));
  const relays = {
    direct: (
      await roles.start<{ path: string }>('relay', { path: join(dir, 'direct'), port: services.h2 })
    ).path,
    directH1: (
      await roles.start<{ path: string }>('relay', {
        path: join(dir, 'direct-h1'),
        port: services.h1,
      })
    ).path,
    edge: (
      await roles.start<{ path: string }>('relay', {
        path: join(dir, 'edge'),
        port: edge.httpsPort,
      })
    ).path,
  };
  const runs = {
    h2Direct: [] as number[],
    h2Edge: [] as number[],
    h1Direct: [] as number[],
    h2ToH1Edge: [] as number[],
    h1Edge: [] as number[],
    h1ToH2Edge: [] as number[],
    grpcDirect: [] as number[],
    grpcEdge: [] as number[],
  };
  let errors = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const direct = await h2load(`http://127.0.0.1:${services.h2}/`, relays.direct);
    const through = await h2load(`https://${hosts.h2}:${edge.httpsPort}/`, relays.edge);
    const h1Direct = await h2load(`http://127.0.0.1:${services.h1}/`, relays.directH1, true);
    const h2ToH1 = await h2load(`https://${hosts.h1}:${edge.httpsPort}/`, relays.edge);
    const h1Edge = await h2load(`https://${hosts.h1}:${edge.httpsPort}/`, relays.edge, true);
    const h1ToH2 = await h2load(`https://${hosts.h2}:${edge.httpsPort}/`, relays.edge, true);
    const grpcDirect = await roles.start<{ rate: number; errors: number }>('grpcLoad', {
      target: `127.0.0.1:${services.grpc}`,
    });
    const grpcEdge = await roles.start<{ rate: number; errors: number }>('grpcLoad', {
      target: `127.0.0.1:${edge.httpsPort}`,
      host: hosts.grpc,
      ca,
    });
    runs.h2Direct.push(direct.rate);
    runs.h2Edge.push(through.rate);
    runs.h1Direct.push(h1Direct.rate);
    runs.h2ToH1Edge.push(h2ToH1.rate);
    runs.h1Edge.push(h1Edge.rate);
    runs.h1ToH2Edge.push(h1ToH2.rate);
    runs.grpcDirect.push(grpcDirect.rate);
    runs.grpcEdge.push(grpcEdge.rate);
    errors += direct.errors + through.errors + grpcDirect.errors + grpcEdge.errors;
    errors += h1Direct.errors + h2ToH1.errors + h1Edge.errors + h1ToH2.errors;
    process.stderr.write(`round ${round + 1} done\n`);
  }
  const row = (name: string, direct: number[], edge: number[]): string[] => [
    name,
    fmt(median(direct)),
    fmt(median(edge)),
    fmt(median(edge) / median(direct), 2),
  ];
  console.log(
    `\nHTTP/2 and gRPC through the edge against direct, ${machine()}; ${DURATION} s per run, ` +
      `median of ${ROUNDS} alternating rounds; h2load -c ${CLIENTS} -m ${STREAMS} ` +
      `(--h1: -c ${CLIENTS * STREAMS} -m 1), ` +
      `${CALLS} gRPC calls in flight; ${errors} errors.\n`,
  );
  console.log(
    markdownTable(
      ['load', 'direct req/s', 'through the edge req/s', 'ratio'],
      [
        row(
          'h2 keep-alive (h2load; edge: TLS + h2, h2c to the service)',
          runs.h2Direct,
          runs.h2Edge,
        ),
        row(
          'h2 client, HTTP/1.1 service (edge: TLS + h2, HTTP/1.1 to the service; direct: --h1)',
          runs.h1Direct,
          runs.h2ToH1Edge,
        ),
        row(
          'HTTP/1.1 client, HTTP/1.1 service (edge: TLS + HTTP/1.1; direct: --h1)',
          runs.h1Direct,
          runs.h1Edge,
        ),
        row(
          'HTTP/1.1 client, h2c service (edge: TLS + HTTP/1.1, an HTTP/2 call to the service; direct: h2)',
          runs.h2Direct,
          runs.h1ToH2Edge,
        ),
        row('gRPC unary calls (@grpc/grpc-js)', runs.grpcDirect, runs.grpcEdge),
      ],
    ),
  );
}

runRoles(roles, {
  main,
  edge: serveEdge,
  services: serveServices,
  agent: (arg) => serveAgent(arg as { edge: EdgeInfo; services: Services }),
  relay: (arg) => serveRelay(arg as { path: string; port: number }),
  grpcLoad: (arg) => grpcLoad(arg as { target: string; host?: string; ca?: string }),
});
