/**
 * Fixtures for ingress tests: fake online tunnels whose connect() dials a local upstream over a
 * real TCP connection (exactly the OnlineTunnel contract, with no agent), upstream servers, and a
 * running ingress with a local CA.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import {
  createServer,
  request,
  type Agent,
  type IncomingMessage,
  type RequestListener,
} from 'node:http';
import {
  connect,
  createServer as createNetServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { CertificateStore, LocalCa } from '../../src/edge/certificates/certificates.js';
import { startIngress, type Ingress, type IngressOptions } from '../../src/edge/ingress/ingress.js';
import { EdgeMetrics } from '../../src/edge/metrics/metrics.js';
import {
  TunnelRegistry,
  type OnlineTunnel,
  type ProxyInfo,
  type TunnelProto,
} from '../../src/edge/registry/tunnel-registry.js';

let nextTunnel = 0;

export interface FakeTunnel extends OnlineTunnel {
  /** Every ProxyInfo connect() was called with, in order. */
  connects: ProxyInfo[];
}

/**
 * An online tunnel whose streams are TCP connections to `127.0.0.1:upstreamPort`, or whatever
 * `connect` returns (to make it fail or misbehave).
 * @example registry.addTunnel(fakeTunnel({ proto: 'http', hostname: 'app.burrow.test', upstreamPort }));
 */
export function fakeTunnel(options: {
  proto: TunnelProto;
  hostname?: string;
  port?: number;
  upstreamPort?: number;
  connect?: (info: ProxyInfo) => Promise<Duplex>;
  /** The bind's ForwardsTo; default `localhost:<upstreamPort>`. */
  forwardsTo?: string;
  /** Opts.HostHeaderRewrite. */
  hostHeaderRewrite?: true;
}): FakeTunnel {
  const n = ++nextTunnel;
  const connects: ProxyInfo[] = [];
  const where = options.hostname ?? `:${options.port}`;
  return {
    id: `tn_fake${n}`,
    sessionId: `ts_fake${n}`,
    bindId: `bind${n}`,
    proto: options.proto,
    url: `${options.proto}://${where}`,
    hostname: options.hostname,
    port: options.port,
    forwardsTo: options.forwardsTo ?? `localhost:${options.upstreamPort ?? 0}`,
    ...(options.hostHeaderRewrite ? { hostHeaderRewrite: options.hostHeaderRewrite } : {}),
    metadata: '',
    startedAt: new Date().toISOString(),
    connects,
    connect(info) {
      connects.push(info);
      if (options.connect) return options.connect(info);
      // Like Go's net package (the agents), which sets TCP_NODELAY on every connection.
      return dialLocal(options.upstreamPort ?? 0, { noDelay: true });
    },
  };
}

/**
 * A TCP connection to 127.0.0.1:`port`, resolved once connected (a fake tunnel's stream).
 * @example connect: () => dialLocal(upstream.port, { allowHalfOpen: true })
 */
export function dialLocal(
  port: number,
  options: { noDelay?: boolean; allowHalfOpen?: boolean } = {},
): Promise<Duplex> {
  return new Promise<Duplex>((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', ...options });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/**
 * Send `text` on a new connection to 127.0.0.1:`port`; everything received (latin1) until the
 * server closes it, or until `timeoutMs` pass and the connection is cut. Socket errors only end it.
 * @example const reply = await rawExchange(ingressPort, 'GET / HTTP/1.1\r\nHost: a\r\n\r\n');
 */
export async function rawExchange(port: number, text: string, timeoutMs = 10_000): Promise<string> {
  const socket = connect({ port, host: '127.0.0.1' });
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  socket.setTimeout(timeoutMs, () => socket.destroy());
  socket.write(text, 'latin1');
  await closed;
  return Buffer.concat(chunks).toString('latin1');
}

/** A listening server on 127.0.0.1 with a random port, closed (connections cut) by close(). */
export interface LocalServer {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Connections open now. */
  readonly open: number;
  close(): Promise<void>;
}

/**
 * Listen on a random 127.0.0.1 port, counting connections and cutting them on close().
 * @example const local = await listenLocal(createNetServer(onSocket));
 */
export async function listenLocal(server: Server): Promise<LocalServer> {
  let accepted = 0;
  const sockets = new Set<Duplex>();
  server.on('connection', (socket: Duplex) => {
    accepted++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    get accepted() {
      return accepted;
    },
    get open() {
      return sockets.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * An HTTP upstream (the "local service" behind an agent).
 * @example const up = await startHttpUpstream((req, res) => res.end('hi'));
 */
export async function startHttpUpstream(
  handler: RequestListener,
  setup?: (server: ReturnType<typeof createServer>) => void,
): Promise<LocalServer> {
  const server = createServer(handler);
  setup?.(server);
  return listenLocal(server);
}

/** A raw TCP upstream; `onSocket` gets each accepted connection. */
export async function startTcpUpstream(onSocket: (socket: Socket) => void): Promise<LocalServer> {
  return listenLocal(createNetServer({ allowHalfOpen: true }, onSocket));
}

/** A free TCP port on 127.0.0.1; one implementation, kept in server-process.ts. */
export { freePort } from './server-process.js';

export interface HttpReply {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

/**
 * A response read whole: its status, headers and body as text.
 * @example const reply = await readReply(res);
 */
export function readReply(res: IncomingMessage): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () =>
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: Buffer.concat(chunks).toString(),
      }),
    );
    res.on('error', reject);
  });
}

/**
 * One HTTP request to `port` on 127.0.0.1 with a Host header (Node cannot resolve test names).
 * @example const reply = await httpRequest(ingressPort, { host: 'app.burrow.test', path: '/' });
 */
export async function httpRequest(
  port: number,
  options: {
    host: string;
    path?: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    agent?: Agent | false;
  },
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? '/',
        method: options.method ?? 'GET',
        headers: { Host: options.host, ...options.headers },
        agent: options.agent ?? false,
      },
      (res) => void readReply(res).then(resolve, reject),
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * A visitor: GET `path` on 127.0.0.1:`port` with a Host header, the answer read and dropped.
 * Resolves however it ends (answered, refused, reset); with `leave`, the visitor hangs up when
 * that settles, answered or not.
 * @example await visit(edge.httpPort, host, '/slow', setTimeout(200)); // node:timers/promises
 */
export function visit(
  port: number,
  host: string,
  path: string,
  leave?: Promise<unknown>,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } });
    req.on('response', (res) =>
      res
        .resume()
        .on('end', resolve)
        .on('error', () => resolve()),
    );
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.end();
    void leave?.then(() => req.destroy());
  });
}

/** A running ingress on random ports with its registry, metrics and local CA. */
export interface TestIngress {
  ingress: Ingress;
  registry: TunnelRegistry;
  metrics: EdgeMetrics;
  ca: LocalCa;
  httpPort: number;
  httpsPort: number;
  close(): Promise<void>;
}

/** The names the test certificate store serves: the test base domain and below. */
export const TEST_DOMAIN = 'burrow.test';

/**
 * Start an ingress on 127.0.0.1 (random ports) with a fresh local CA serving `*.burrow.test`.
 * @example const t = await startTestIngress(); ... await t.close();
 */
export async function startTestIngress(extra: Partial<IngressOptions> = {}): Promise<TestIngress> {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-ingress-'));
  const ca = await LocalCa.loadOrCreate(dir);
  const registry = new TunnelRegistry();
  const metrics = new EdgeMetrics();
  const certificates = new CertificateStore({
    ca,
    nameAllowed: (name) => name.endsWith(`.${TEST_DOMAIN}`),
  });
  const ingress = await startIngress({
    httpListen: '127.0.0.1:0',
    httpsListen: '127.0.0.1:0',
    registry,
    metrics,
    certificates,
    ...extra,
  });
  const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));
  return {
    ingress,
    registry,
    metrics,
    ca,
    httpPort: portOf(ingress.httpAddress),
    httpsPort: portOf(ingress.httpsAddress),
    async close() {
      await ingress.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The sum of every series of `name` in a text exposition (`/metrics`), or of those whose labels
 * begin with `labels`; 0 when there is none.
 * @example metricSum(metrics.render(), 'burrow_policy_states', '{state="live"}')
 */
export function metricSum(text: string, name: string, labels = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}${labels}`) && /[ {]/.test(line.charAt(name.length))) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/**
 * The value of one series in EdgeMetrics' text exposition, 0 when absent.
 * @example metricValue(metrics, 'burrow_http_requests_total', { endpoint, code: '200' })
 */
export function metricValue(
  metrics: EdgeMetrics,
  name: string,
  labels: Record<string, string>,
): number {
  const key = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  const line = metrics
    .render()
    .split('\n')
    .find((l) => l.startsWith(`${name}{${key}} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
