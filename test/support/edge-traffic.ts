/**
 * Fixtures for tests of edges on live traffic: labeled fake tunnels (the OnlineTunnel contract
 * over a real TCP connection to a local upstream), echo upstreams that say who answered, and
 * TCP and TLS clients that report whether they were served or cut off.
 */
import { connect, createServer, type Socket } from 'node:net';
import {
  connect as tlsConnect,
  createServer as createTlsServer,
  type SecureVersion,
  type TLSSocket,
} from 'node:tls';
import type { OnlineTunnel, ProxyInfo } from '../../src/edge/registry/tunnel-registry.js';
import { dialLocal, listenLocal } from './ingress.js';

/** The TLS edge sample of the API docs: log and deny TLS 1.3 clients. */
export const TLS_SAMPLE = JSON.stringify({
  inbound: [
    {
      name: 'AllowTLS1.3',
      expressions: ['conn.TLS.Version.contains("1.3")'],
      actions: [
        { type: 'log', config: { metadata: { message: 'Invalid TLS Version' } } },
        { type: 'deny' },
      ],
    },
  ],
  outbound: [],
});

let nextTunnel = 0;

/** A fake labeled tunnel; `connects` records every ProxyHeader it was opened with. */
export interface LabeledFake extends OnlineTunnel {
  connects: ProxyInfo[];
}

/**
 * A labeled tunnel whose streams are TCP connections to `127.0.0.1:<port>`, where the port may
 * depend on the ProxyHeader (e.g. passthrough TLS to a TLS upstream).
 * @example registry.addTunnel(labeledFake({ edge: id }, () => upstream.port));
 */
export function labeledFake(
  labels: Record<string, string>,
  upstreamPort: (info: ProxyInfo) => number,
): LabeledFake {
  const n = ++nextTunnel;
  const connects: ProxyInfo[] = [];
  return {
    id: `tn_labeled${n}`,
    sessionId: `ts_labeled${n}`,
    bindId: `label${n}`,
    proto: undefined,
    url: undefined,
    labels,
    forwardsTo: 'test',
    metadata: '',
    startedAt: new Date().toISOString(),
    connects,
    connect(info) {
      connects.push(info);
      return dialLocal(upstreamPort(info), { allowHalfOpen: true });
    },
  };
}

/** A local echo server that answers `<name>:` then echoes, over TCP or TLS. */
export interface EchoServer {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

function echo(name: string) {
  return (socket: Socket | TLSSocket): void => {
    socket.on('error', () => socket.destroy());
    socket.write(`${name}:`);
    socket.pipe(socket);
  };
}

/** A plain TCP echo server answering `<name>:<what was sent>`. */
export function startEchoServer(name: string): Promise<EchoServer> {
  return listenLocal(createServer({ allowHalfOpen: true }, echo(name)));
}

/** A TLS echo server with `cert`/`key` (a passthrough target: the client sees this certificate). */
export function startTlsEchoServer(
  name: string,
  cert: { certPem: string; keyPem: string },
): Promise<EchoServer> {
  const server = createTlsServer(
    { cert: cert.certPem, key: cert.keyPem, allowHalfOpen: true },
    echo(name),
  );
  server.on('tlsClientError', () => undefined);
  return listenLocal(server);
}

/** What a client saw: everything the server sent, and the error that ended it, if any. */
export interface Exchange {
  /** True when any answer arrived. */
  served: boolean;
  text: string;
  error?: string | undefined;
  /** TLS: the server certificate's subject CN, and whether it verified against the `ca` given. */
  peerCn?: string | undefined;
  authorized?: boolean | undefined;
  protocol?: string | null | undefined;
}

function collect(socket: Socket, timeoutMs: number, extra: () => Partial<Exchange>) {
  return new Promise<Exchange>((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('timeout')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.once('close', () => {
      const text = Buffer.concat(chunks).toString();
      resolve({ served: text.length > 0, text, error, ...extra() });
    });
  });
}

/**
 * Connect to `127.0.0.1:<port>`, send `payload`, half-close, and read until the server closes.
 * @example expect((await tcpExchange(port)).text).toBe('a:ping');
 */
export function tcpExchange(port: number, payload = 'ping', timeoutMs = 5000): Promise<Exchange> {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  socket.once('connect', () => socket.end(payload));
  return collect(socket, timeoutMs, () => ({}));
}

/**
 * A TLS client to `127.0.0.1:<port>` with SNI `servername`: sends `payload` after the handshake,
 * half-closes, reads until closed. Without `ca` any certificate is accepted (passthrough tests
 * look at `peerCn` instead).
 */
export function tlsExchange(options: {
  port: number;
  servername: string;
  payload?: string;
  ca?: string;
  minVersion?: SecureVersion;
  maxVersion?: SecureVersion;
  cert?: { certPem: string; keyPem: string };
  timeoutMs?: number;
}): Promise<Exchange> {
  const socket = tlsConnect({
    host: '127.0.0.1',
    port: options.port,
    servername: options.servername,
    rejectUnauthorized: false,
    ...(options.ca ? { ca: options.ca } : {}),
    ...(options.minVersion ? { minVersion: options.minVersion } : {}),
    ...(options.maxVersion ? { maxVersion: options.maxVersion } : {}),
    ...(options.cert ? { cert: options.cert.certPem, key: options.cert.keyPem } : {}),
  });
  let peerCn: string | undefined;
  let authorized: boolean | undefined;
  let protocol: string | null | undefined;
  socket.once('secureConnect', () => {
    const subject = socket.getPeerCertificate().subject as { CN?: string } | undefined;
    peerCn = subject?.CN;
    authorized = socket.authorized;
    protocol = socket.getProtocol();
    socket.end(options.payload ?? 'ping');
  });
  return collect(socket, options.timeoutMs ?? 5000, () => ({ peerCn, authorized, protocol }));
}
