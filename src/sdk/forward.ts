/**
 * Where an endpoint's proxied connections go: a local address (dialled per connection and spliced
 * byte for byte, with half-close), or a Node server or request handler that gets the connection
 * as if it had accepted it.
 */
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import { relay } from '../core/relay.js';
import { asSocket } from '../core/socket-like.js';
import http, { type RequestListener } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import {
  readIntoSlabs,
  type MuxStream,
  type ProxyHeader,
  type SlabLender,
} from '../protocol/index.js';
import { BurrowAgentError } from './errors.js';
import { HttpObserver, type HttpExchange } from './http-observer.js';

/**
 * What an endpoint forwards to: a port (`3000`), `host:port`, a URL (`http://`, `https://`,
 * `tcp://`, `tls://`; `https`/`tls` dial the local service over TLS), a `net.Server` /
 * `http.Server` / `tls.Server` (connections are handed to it with `emit('connection')`, it need
 * not listen), or an HTTP request handler `(req, res) => …`.
 */
export type ForwardTarget = string | number | net.Server | RequestListener;

/** A local service address parsed from a ForwardTarget. */
export interface LocalAddress {
  host: string;
  port: number;
  /** Dial with TLS (https:// and tls:// targets). */
  tls: boolean;
}

/** The code in the body of the 502 an agent answers when the local service is unreachable. */
export const UPSTREAM_UNREACHABLE_CODE = 'ERR_NGROK_8012';

/** Unlike core/host-port.ts DEFAULT_PORTS, no port for tls://: a local TLS service must name its port. */
const DEFAULT_PORTS: Record<string, number | undefined> = { http: 80, https: 443 };

function badTarget(target: unknown): BurrowAgentError {
  return new BurrowAgentError(
    `cannot forward to ${JSON.stringify(target)}: use a port (3000), host:port (localhost:3000), a URL (http://localhost:3000), a Node server or a request handler`,
  );
}

/**
 * Parse a port, `host:port` or URL target.
 * @example parseLocalAddress('3000') // { host: 'localhost', port: 3000, tls: false }
 * @example parseLocalAddress('https://[::1]:8443') // { host: '::1', port: 8443, tls: true }
 */
export function parseLocalAddress(target: string | number): LocalAddress {
  const port = (value: string | number | undefined): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 65535) throw badTarget(target);
    return n;
  };
  if (typeof target === 'number' || /^\d+$/.test(target.trim())) {
    return { host: 'localhost', port: port(target), tls: false };
  }
  const text = target.trim();
  const scheme = /^([a-z]+):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    if (!['http', 'https', 'tcp', 'tls'].includes(scheme)) throw badTarget(target);
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw badTarget(target);
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (host === '') throw badTarget(target);
    return {
      host,
      port: port(url.port === '' ? DEFAULT_PORTS[scheme] : url.port),
      tls: scheme === 'https' || scheme === 'tls',
    };
  }
  const parsed = /[\s/]/.test(text) ? undefined : parseHostPort(text);
  if (!parsed) throw badTarget(target);
  return { host: parsed.host, port: port(parsed.port), tls: false };
}

/** How a forwarder reports to its endpoint. */
export interface ForwardHooks {
  /** The endpoint's public URL, for error pages. */
  url: string | undefined;
  /** Called with each HTTP exchange, when the endpoint's request log is wanted. */
  onExchange: ((exchange: HttpExchange) => void) | undefined;
  /** Bytes of each request and response to keep in the exchange (0: none). */
  captureBytes: number;
  /** A connection could not be forwarded (the local service is down, refused, reset…). */
  onError: (err: Error, header: ProxyHeader) => void;
  /**
   * The endpoint's app protocol is `http2`: the edge speaks HTTP/2 with prior knowledge on the
   * stream, relayed as bytes and never read or answered as HTTP/1.1.
   */
  http2?: boolean | undefined;
}

/** Forwards proxied connections to one target. */
export interface Forwarder {
  /** The target in words, for `ForwardsTo` and logs, e.g. `localhost:3000`. */
  readonly description: string;
  handle(stream: MuxStream, header: ProxyHeader, hooks: ForwardHooks): void;
}

/** Whether the edge hands this connection over as plain HTTP/1.1 (so a 502 can be answered). */
export function carriesHttp(header: ProxyHeader, hooks: Pick<ForwardHooks, 'http2'>): boolean {
  const proto = header.Proto?.toLowerCase();
  return (proto === 'http' || proto === 'https') && !header.PassthroughTLS && hooks.http2 !== true;
}

/**
 * Make a Forwarder for `target`; throws BurrowAgentError for a target it cannot use.
 * @example createForwarder('localhost:3000', { connectTimeoutMs: 10_000 }).description // 'localhost:3000'
 */
export function createForwarder(
  target: ForwardTarget,
  options: { connectTimeoutMs: number },
): Forwarder {
  if (typeof target === 'string' || typeof target === 'number') {
    const address = parseLocalAddress(target);
    const description = `${address.tls ? 'https://' : ''}${formatHostPort(address.host, address.port)}`;
    return {
      description,
      handle: (stream, header, hooks) =>
        forwardToAddress(stream, header, hooks, address, description, options.connectTimeoutMs),
    };
  }
  if (typeof target === 'function') {
    const server = http.createServer(target);
    return serverForwarder(server, 'request handler');
  }
  if (target instanceof net.Server) {
    return serverForwarder(target, target instanceof http.Server ? 'http.Server' : 'net.Server');
  }
  throw badTarget(target);
}

// ---- local addresses ---------------------------------------------------------------------

/**
 * Bytes relayed from the edge are written as they arrive, several small writes per message (an
 * HTTP/2 HEADERS frame, then DATA): with Nagle on, the second waits for the service's delayed ACK
 * of the first, 40 ms. One gRPC unary call at a time went 21 calls/s through the tunnel that way,
 * 460 without (bench/h2-grpc.ts).
 */
function dialLocal(address: LocalAddress): net.Socket {
  const socket = address.tls
    ? // Local services commonly use self-signed certificates; the hop is on the agent's machine.
      tls.connect({
        host: address.host,
        port: address.port,
        ...(net.isIP(address.host) ? {} : { servername: address.host }),
        rejectUnauthorized: false,
      })
    : net.connect({ host: address.host, port: address.port, allowHalfOpen: true });
  return socket.setNoDelay(true);
}

function forwardToAddress(
  stream: MuxStream,
  header: ProxyHeader,
  hooks: ForwardHooks,
  address: LocalAddress,
  description: string,
  connectTimeoutMs: number,
): void {
  const local = dialLocal(address);
  const connected = address.tls ? 'secureConnect' : 'connect';
  let settled = false;
  const timer = setTimeout(
    () => fail(new Error(`no connection within ${connectTimeoutMs} ms`)),
    connectTimeoutMs,
  );
  const abandon = (): void => {
    // The public side went away before the local connection was made.
    if (!settled) {
      settled = true;
      clearTimeout(timer);
      local.destroy();
    }
  };
  stream.once('close', abandon);
  const fail = (err: Error): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    stream.off('close', abandon);
    local.destroy();
    const reason = (err as NodeJS.ErrnoException).code ?? err.message;
    const error = new BurrowAgentError(
      `cannot reach ${description} for ${header.ClientAddr}: ${reason}`,
      UPSTREAM_UNREACHABLE_CODE,
      { cause: err },
    );
    if (carriesHttp(header, hooks)) answerBadGateway(stream, header, hooks, description, reason);
    else stream.destroy();
    hooks.onError(error, header);
  };
  local.once('error', fail);
  local.on('error', () => undefined); // later errors are handled by relay()
  local.once(connected, () => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    stream.off('close', abandon);
    local.off('error', fail);
    if (hooks.onExchange && carriesHttp(header, hooks)) {
      // It copies what it keeps of a read: the memory of a read may be read into again.
      const observer = new HttpObserver(header.ClientAddr, hooks.onExchange, hooks.captureBytes);
      stream.on('data', (chunk: Buffer) => observer.request(chunk));
      local.on('data', (chunk: Buffer) => observer.response(chunk));
      local.once('close', () => observer.close());
    }
    relay(stream, local);
    const lender = stream.sendLender;
    if (lender && !address.tls) readBulkIntoSlabs(local, stream, lender);
    if (carriesHttp(header, hooks)) refuseAfterServiceClosed(stream, local);
  });
}

/** Bytes a service connection has read before it may read into slabs. */
const BULK_AFTER = 1024 * 1024;

/**
 * Once `local` shows itself to be a bulk transfer (a megabyte read, and more coming than the
 * link takes at once: the stream's back-pressure, 'drain'), read it into slabs lent from `lender`
 * instead of a fresh 64 KiB buffer per read: the stream gives each piece back once the link has
 * written it, and the next reads go into the same memory. A download through the SDK otherwise
 * left tens of thousands of 64 KiB buffers per GB to the garbage collector, whose mark-compacts
 * (3-4 a second) doubled the agent's CPU per GB (docs/benchmarks.md, issue 29). Only bulk
 * connections: a slab reader keeps its slab (256 KiB) for as long as the connection is open, idle
 * or not, where Node's own reads keep nothing. Judged on 'drain', which small answers never
 * cause, so they cost nothing per read.
 */
function readBulkIntoSlabs(local: net.Socket, stream: MuxStream, lender: SlabLender): void {
  // After the pipe's own 'drain' listener has emptied what the paused socket buffered: a socket
  // switches only with nothing waiting in it.
  const trySwitch = (): void => {
    if (local.bytesRead < BULK_AFTER || local.destroyed) return;
    if (readIntoSlabs(local, lender.slabSize, lender)) stream.off('drain', onDrain);
  };
  const onDrain = (): void => process.nextTick(trySwitch);
  stream.on('drain', onDrain);
}

/**
 * An HTTP service that ends its side of a connection (an idle keep-alive timeout, or
 * `Connection: close`) will answer nothing more on it. The edge may still send a request on the
 * stream (it pools streams for keep-alive), so such late bytes reset the stream, as a TCP peer
 * would: the edge then retries on a fresh stream instead of waiting for an answer forever.
 */
function refuseAfterServiceClosed(stream: MuxStream, local: Duplex): void {
  local.once('end', () => {
    if (stream.readableEnded) return;
    stream.on('data', () => {
      stream.destroy();
      local.destroy();
    });
  });
}

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
};

/**
 * Answer the public client 502 at once (the local service is down), as text or, for browsers,
 * HTML; the request's head is read from what the edge already sent.
 */
function answerBadGateway(
  stream: MuxStream,
  header: ProxyHeader,
  hooks: ForwardHooks,
  description: string,
  reason: string,
): void {
  const startedAt = performance.now();
  const head = (stream.read() as Buffer | null)?.toString('latin1') ?? '';
  const requestLine = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r?\n/.exec(head);
  const html = /\r\naccept:[^\r\n]*text\/html/i.test(head);
  const message =
    `The endpoint ${hooks.url ?? ''} is online and the request reached its agent, but the agent ` +
    `could not connect to the service at ${description} (${reason}). Start the service, or ` +
    'forward the endpoint to the address it listens on.';
  const body = html
    ? '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>502 Bad Gateway</title></head>' +
      `<body><h1>Bad gateway</h1><p>${message.replace(/[&<>"]/g, (c) => HTML_ESCAPES[c]!)}</p>` +
      `<p>${UPSTREAM_UNREACHABLE_CODE}</p></body></html>\n`
    : `502 Bad Gateway\n\n${message}\n\n${UPSTREAM_UNREACHABLE_CODE}\n`;
  const isHead = requestLine?.[1] === 'HEAD';
  stream.end(
    'HTTP/1.1 502 Bad Gateway\r\n' +
      `Content-Type: ${html ? 'text/html' : 'text/plain'}; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Cache-Control: no-store\r\n' +
      `Burrow-Error-Code: ${UPSTREAM_UNREACHABLE_CODE}\r\n` +
      'Connection: close\r\n\r\n' +
      (isHead ? '' : body),
  );
  // Whatever else the client sends is not wanted; the edge closes its side after the answer.
  stream.on('error', () => undefined);
  stream.resume();
  setTimeout(() => stream.destroy(), 30_000).unref();
  hooks.onExchange?.({
    method: requestLine?.[1] ?? '',
    path: requestLine?.[2] ?? '',
    status: 502,
    durationMs: performance.now() - startedAt,
    clientAddr: header.ClientAddr,
  });
}

// ---- Node servers and handlers -----------------------------------------------------------

/** Reporters of the streams handed to HTTP servers, found again by `req.socket`. */
const exchangeReporters = new WeakMap<object, (exchange: HttpExchange) => void>();
const observedServers = new WeakSet<net.Server>();

function serverForwarder(server: net.Server, description: string): Forwarder {
  if (server instanceof http.Server && !observedServers.has(server as net.Server)) {
    observedServers.add(server as net.Server);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const report = exchangeReporters.get(req.socket);
      if (!report) return;
      const startedAt = performance.now();
      res.once('close', () =>
        report({
          method: req.method ?? '',
          path: req.url ?? '',
          status: res.headersSent ? res.statusCode : 0,
          durationMs: performance.now() - startedAt,
          clientAddr: `${req.socket.remoteAddress}:${req.socket.remotePort}`,
        }),
      );
    });
  }
  return {
    description,
    handle(stream, header, hooks) {
      const socket = asSocket(stream, header.ClientAddr);
      if (hooks.onExchange) exchangeReporters.set(socket, hooks.onExchange);
      server.emit('connection', socket);
    },
  };
}
