/**
 * One public HTTP/1.1 connection on the lean relay. Request heads are read here (strictly); each
 * request is routed by its own Host, its head is written into a tunnel stream with
 * `X-Forwarded-*`, and its body and the response are relayed as bytes, by their framing. The
 * connection keeps its tunnel stream while both sides keep alive: no stream per request.
 *
 * A request this relay does not carry itself (a traffic policy, an upgrade, an error page, body
 * capture…) hands the connection, with the bytes read so far, to the full HTTP path
 * (http-ingress.ts), which serves it from then on.
 */
import type { Duplex } from 'node:stream';
import type { EndpointMeters } from '../../metrics/endpoint-meters.js';
import { INGRESS_ERRORS, rawErrorResponse } from '../error-pages.js';
import type { PublicConnections } from './http-connections.js';
import { rewrittenHost, routingHost } from './http-forwarding.js';
import { bareRefusal } from './http-parser-refusals.js';
import { clientAddr, clientIp, connectTunnel, serverAddr } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../../registry/tunnel-registry.js';
import {
  agentRequestHead,
  clientResponseHead,
  CloseFramer,
  Exchange,
  responseFramer,
  type ExchangeTap,
} from './exchange.js';
import { HeadScanner, type HeadError } from './head-syntax.js';
import { parseRequestHead, type RequestHead } from './request-head.js';
import { parseResponseHead } from './response-head.js';
import type { StreamPool } from './stream-pool.js';

/** What every connection of one listener shares. */
export interface HttpRelayContext {
  meters: EndpointMeters;
  connections: PublicConnections;
  pool: StreamPool;
  maxHeaderBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  connectTimeoutMs: number | undefined;
  tap: ExchangeTap | undefined;
  /** The tunnel (a pool member, picked) this relay carries the request to, or undefined. */
  route(head: RequestHead, host: string | undefined, socket: Duplex): OnlineTunnel | undefined;
  /** Serve the rest of the connection on the full HTTP path; `buffered` was read, not served. */
  handOver(socket: Duplex, buffered: Buffer | undefined): void;
  /** A client went over a limit the relay enforces. */
  onLimit(clientIp: string, limit: string): void;
  /** True once the ingress drains: connections close after their current response. */
  readonly draining: boolean;
  /** Forget a closed connection. */
  closed(connection: HttpConnection): void;
}

const enum Phase {
  /** Reading a request head (or idle between requests). */
  Head,
  /** Waiting for a tunnel stream. */
  Connecting,
  /** Relaying a request body. */
  Body,
  /** The request is sent; waiting for the rest of the response. */
  Waiting,
  Closed,
}

/** Public bytes held while a response is pending (pipelined requests) before reads pause. */
const MAX_BUFFERED = 256 * 1024;
/** The most a response head may take. */
const MAX_RESPONSE_HEAD = 64 * 1024;

function concat(a: Buffer | undefined, b: Buffer): Buffer {
  return a === undefined || a.length === 0 ? b : Buffer.concat([a, b]);
}

/**
 * @example new HttpConnection(socket, context).start();
 */
export class HttpConnection {
  private phase = Phase.Head;
  private buffered: Buffer | undefined;
  private readonly scanner = new HeadScanner();
  private headTimer: NodeJS.Timeout | undefined;
  private exchange: Exchange | undefined;
  private stream: Duplex | undefined;
  private streamTunnel: OnlineTunnel | undefined;
  private streamError: string | undefined;
  /** The stream refused a write: reading the client waits for its 'drain' (one listener). */
  private streamFull = false;
  /** The stream's tunnel went offline: the stream closes once the exchange under way ends. */
  private streamRetired = false;
  private clientEnded = false;
  private readonly proto: 'http' | 'https';
  private readonly ip: string;
  private readonly poolKey: string;

  constructor(
    private readonly socket: Duplex,
    private readonly ctx: HttpRelayContext,
  ) {
    this.proto = (socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http';
    this.ip = clientIp(socket as { remoteAddress?: string });
    this.poolKey = `${this.proto} ${this.ip}`;
  }

  start(): void {
    const socket = this.socket;
    socket.on('data', this.onSocketData);
    socket.on('end', this.onSocketEnd);
    socket.on('close', this.onSocketClose);
    socket.on('error', this.onSocketError);
    socket.on('timeout', this.onSocketTimeout);
    (socket as Duplex & { setTimeout(ms: number): void }).setTimeout(this.ctx.keepAliveTimeoutMs);
  }

  /** Close now if no request is under way (draining); otherwise after the current response. */
  closeIfIdle(): void {
    if (this.phase === Phase.Head && this.exchange === undefined && !this.buffered?.length) {
      this.socket.end();
    }
  }

  /** A tunnel went offline: its stream closes now, or after the exchange under way. */
  tunnelRemoved(tunnel: OnlineTunnel): void {
    if (this.streamTunnel !== tunnel) return;
    if (this.exchange) this.streamRetired = true;
    else this.dropStream();
  }

  private readonly onSocketData = (chunk: Buffer): void => {
    switch (this.phase) {
      case Phase.Head:
        this.buffered = concat(this.buffered, chunk);
        this.readHead();
        return;
      case Phase.Body:
        this.relayRequestBody(chunk);
        return;
      case Phase.Connecting:
      case Phase.Waiting:
        // Pipelined requests wait for the response before theirs.
        this.buffered = concat(this.buffered, chunk);
        if (this.buffered.length > MAX_BUFFERED) this.socket.pause();
        return;
      default:
        return;
    }
  };

  private readonly onSocketEnd = (): void => {
    this.clientEnded = true;
    if (this.phase === Phase.Head && this.exchange === undefined) this.socket.end();
  };

  private readonly onSocketError = (): void => {
    this.socket.destroy();
  };

  private readonly onSocketTimeout = (): void => {
    // Idle between requests for keepAliveTimeoutMs; a request under way is not idle.
    if (this.phase === Phase.Head && this.exchange === undefined) this.socket.destroy();
  };

  private readonly onSocketClose = (): void => {
    this.phase = Phase.Closed;
    clearTimeout(this.headTimer);
    const exchange = this.exchange;
    if (exchange) {
      // 499: the client went away before the answer (nginx's convention).
      const status = exchange.response?.status ?? 499;
      exchange.meter.request(status);
      exchange.done?.(status, exchange.response?.raw ?? []);
      this.exchange = undefined;
      this.dropStream();
    } else {
      this.parkStream();
    }
    this.ctx.closed(this);
  };

  private readHead(): void {
    const buf = this.buffered!;
    const end = this.scanner.scan(buf);
    if (typeof end === 'string') {
      this.refuse({ status: 400, reason: end });
      return;
    }
    if (end < 0) {
      if (buf.length > this.ctx.maxHeaderBytes) {
        const status = this.scanner.firstLineDone ? 431 : 414;
        this.refuse({ status, reason: 'a head over the limit', limit: 'ingress_header_bytes' });
      } else {
        this.headTimer ??= setTimeout(this.onHeadTimeout, this.ctx.headersTimeoutMs);
      }
      return;
    }
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    this.scanner.reset();
    const head = parseRequestHead(buf.toString('latin1', 0, end), this.ctx);
    if ('status' in head) {
      this.refuse(head);
      return;
    }
    const host = routingHost(head.host);
    const tunnel = this.ctx.route(head, host, this.socket);
    if (!tunnel) {
      this.handOver();
      return;
    }
    this.buffered = end < buf.length ? buf.subarray(end) : undefined;
    this.begin(head, host ?? '', tunnel);
  }

  private readonly onHeadTimeout = (): void => {
    this.headTimer = undefined;
    if (this.phase !== Phase.Head) return;
    this.refuse({
      status: 408,
      reason: 'the head took too long',
      limit: 'ingress_headers_timeout',
    });
  };

  /** Answer a request the relay will not read, and close. */
  private refuse(error: HeadError): void {
    if (error.limit) this.ctx.onLimit(this.ip, error.limit);
    this.phase = Phase.Closed;
    this.parkStream();
    this.socket.end(bareRefusal(error.status));
  }

  /** Give the connection to the full HTTP path, with what was read and not served. */
  private handOver(): void {
    const socket = this.socket;
    this.phase = Phase.Closed;
    clearTimeout(this.headTimer);
    socket.off('data', this.onSocketData);
    socket.off('end', this.onSocketEnd);
    socket.off('close', this.onSocketClose);
    socket.off('error', this.onSocketError);
    socket.off('timeout', this.onSocketTimeout);
    this.parkStream();
    this.ctx.closed(this);
    const buffered = this.buffered;
    this.buffered = undefined;
    this.ctx.handOver(socket, buffered);
  }

  private begin(head: RequestHead, host: string, tunnel: OnlineTunnel): void {
    const meter = this.ctx.meters.of(tunnel);
    const state = this.ctx.connections.attribute(this.socket, meter);
    const done = this.ctx.tap?.begin({
      host,
      tunnel,
      scheme: this.proto,
      head,
      clientIp: this.ip,
    });
    const exchange = new Exchange(head, tunnel, meter, state, done);
    this.exchange = exchange;
    const stream = this.stream;
    if (stream && this.streamTunnel === tunnel && !stream.readableEnded && !stream.destroyed) {
      exchange.reused = true;
      this.send(exchange);
      return;
    }
    this.parkStream();
    // A stream of a ProxyProto tunnel began with another connection's PROXY header: never reused.
    const pooled = tunnel.proxyProto ? undefined : this.ctx.pool.take(tunnel, this.poolKey);
    if (pooled) {
      exchange.reused = true;
      this.adopt(pooled, tunnel);
      this.send(exchange);
      return;
    }
    this.connect(exchange);
  }

  /** Open a fresh stream for `exchange`, then send it. */
  private connect(exchange: Exchange): void {
    this.phase = Phase.Connecting;
    this.socket.pause();
    const info: ProxyInfo = {
      clientAddr: clientAddr(this.socket as { remoteAddress?: string; remotePort?: number }),
      serverAddr: serverAddr(this.socket as { localAddress?: string; localPort?: number }),
      proto: this.proto,
      edgeType: '',
      passthroughTls: false,
    };
    connectTunnel(exchange.tunnel, info, this.ctx.connectTimeoutMs).then(
      (stream) => {
        if (this.exchange !== exchange) {
          stream.destroy();
          return;
        }
        this.adopt(stream, exchange.tunnel);
        this.send(exchange);
      },
      (err: NodeJS.ErrnoException) => {
        if (this.exchange === exchange) this.badGateway(exchange, err.code ?? err.message);
      },
    );
  }

  private adopt(stream: Duplex, tunnel: OnlineTunnel): void {
    this.stream = stream;
    this.streamTunnel = tunnel;
    this.streamError = undefined;
    this.streamRetired = false;
    this.streamFull = false;
    // Kept for the stream's whole life: a stream let go of (parked, dropped) may still fail when
    // its session does, and an 'error' without a listener would end the process.
    if (!stream.listeners('error').includes(ignoreError)) stream.on('error', ignoreError);
    stream.on('data', this.onStreamData);
    stream.on('end', this.onStreamEnd);
    stream.on('close', this.onStreamClose);
    stream.on('error', this.onStreamError);
    stream.resume();
  }

  private release(): Duplex | undefined {
    const stream = this.stream;
    if (!stream) return undefined;
    stream.off('data', this.onStreamData);
    stream.off('end', this.onStreamEnd);
    stream.off('close', this.onStreamClose);
    stream.off('error', this.onStreamError);
    this.stream = undefined;
    return stream;
  }

  /**
   * Keep an idle stream for the next connection of this client; close it when it began with a
   * PROXY protocol header (ProxyProto), which names this connection only.
   */
  private parkStream(): void {
    const tunnel = this.streamTunnel;
    const stream = this.release();
    if (stream && tunnel?.proxyProto) stream.destroy();
    else if (stream && tunnel) this.ctx.pool.put(tunnel, this.poolKey, stream);
  }

  private dropStream(): void {
    this.release()?.destroy();
  }

  /** Write the request head, then relay its body. */
  private send(exchange: Exchange): void {
    const stream = this.stream!;
    exchange.sentAt = performance.now();
    const host = rewrittenHost(exchange.tunnel);
    stream.write(agentRequestHead(exchange.head, this.proto, this.ip, host), 'latin1');
    const rest = this.buffered;
    this.buffered = undefined;
    if (exchange.requestBody) {
      this.phase = Phase.Body;
      if (rest) this.relayRequestBody(rest);
    } else {
      this.phase = Phase.Waiting;
      this.buffered = rest;
    }
    // Unless the first body bytes already filled the stream: then its 'drain' resumes reading.
    if (!this.streamFull) this.socket.resume();
  }

  private relayRequestBody(chunk: Buffer): void {
    const exchange = this.exchange!;
    const framer = exchange.requestBody!;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      this.breakExchange(exchange, { status: 400, reason: n });
      return;
    }
    const body = n === chunk.length ? chunk : chunk.subarray(0, n);
    if (body.length > 0 && !this.stream!.write(body)) {
      this.socket.pause();
      if (!this.streamFull) {
        this.streamFull = true;
        this.stream!.once('drain', this.resumeSocket);
      }
    }
    if (!framer.done) return;
    exchange.requestBody = undefined;
    this.phase = Phase.Waiting;
    if (n < chunk.length) this.buffered = chunk.subarray(n);
    if (exchange.responded) this.finish(exchange);
  }

  private readonly resumeSocket = (): void => {
    this.streamFull = false;
    if (this.phase !== Phase.Closed) this.socket.resume();
  };

  private readonly resumeStream = (): void => {
    this.stream?.resume();
  };

  private readonly onStreamData = (chunk: Buffer): void => {
    const exchange = this.exchange;
    if (!exchange) {
      // Bytes with no request to answer: the stream is out of step; it cannot be used again.
      this.dropStream();
      return;
    }
    if (exchange.responseBody) this.relayResponseBody(exchange, chunk);
    else this.readResponseHead(exchange, concat(exchange.pendingHead, chunk));
  };

  private readResponseHead(exchange: Exchange, buf: Buffer): void {
    const end = exchange.responseScanner.scan(buf);
    if (typeof end === 'string' || (end < 0 && buf.length > MAX_RESPONSE_HEAD)) {
      this.badGateway(exchange, typeof end === 'string' ? end : 'a response head over 64 KiB');
      return;
    }
    if (end < 0) {
      exchange.pendingHead = buf;
      return;
    }
    exchange.pendingHead = undefined;
    exchange.responseScanner.reset();
    const response = parseResponseHead(buf.toString('latin1', 0, end), exchange.head.method);
    if (!('raw' in response)) {
      this.badGateway(exchange, response.reason);
      return;
    }
    const rest = end < buf.length ? buf.subarray(end) : undefined;
    if (response.status < 200) {
      if (response.status === 101) {
        this.badGateway(exchange, 'a protocol switch the request did not ask for');
        return;
      }
      // 100 Continue, 103 Early Hints: passed on, then the final response follows.
      exchange.answered = true;
      this.socket.write(clientResponseHead(response, false), 'latin1');
      if (rest) this.readResponseHead(exchange, rest);
      return;
    }
    exchange.upstreamAt = performance.now();
    exchange.response = response;
    exchange.responseBody = responseFramer(response.framing);
    exchange.answered = true;
    exchange.closing = this.closesAfter(exchange);
    // The head and what follows it in this turn go out in one write (one syscall, one TLS
    // record): agents that send a response's head and body as two frames (@ngrok/ngrok does) are
    // read in one turn.
    this.socket.cork();
    process.nextTick(uncork, this.socket);
    this.socket.write(clientResponseHead(response, exchange.closing), 'latin1');
    if (rest) this.relayResponseBody(exchange, rest);
    else if (exchange.responseBody.done) this.responseDone(exchange);
  }

  private relayResponseBody(exchange: Exchange, chunk: Buffer): void {
    const framer = exchange.responseBody!;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      // The client already has part of this response: it must see it broken, not short.
      this.socket.destroy();
      return;
    }
    if (n > 0 && !this.socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
      this.stream?.pause();
      this.socket.once('drain', this.resumeStream);
    }
    if (n < chunk.length) exchange.spoiled = true;
    if (framer.done) this.responseDone(exchange);
  }

  private responseDone(exchange: Exchange): void {
    if (exchange.requestSent) this.finish(exchange);
    // Answered before the whole request arrived: the rest is read and the connection closes.
  }

  /** Whether the public connection closes after this exchange's response. */
  private closesAfter(exchange: Exchange): boolean {
    return (
      exchange.head.close ||
      exchange.response?.framing.kind === 'close' ||
      !exchange.requestSent ||
      this.clientEnded ||
      this.ctx.draining
    );
  }

  private finish(exchange: Exchange): void {
    const response = exchange.response!;
    const now = performance.now();
    exchange.meter.request(
      response.status,
      (now - exchange.started) / 1000,
      (exchange.upstreamAt - exchange.sentAt) / 1000,
    );
    if (exchange.state) this.ctx.connections.countBytes(exchange.state);
    exchange.done?.(response.status, response.raw);
    this.exchange = undefined;
    const close = exchange.closing || this.clientEnded || this.ctx.draining;
    if (exchange.spoiled || response.close || this.streamRetired) this.dropStream();
    if (close) {
      this.phase = Phase.Closed;
      this.parkStream();
      this.socket.end();
      return;
    }
    this.phase = Phase.Head;
    this.socket.resume();
    if (this.buffered?.length) this.readHead();
  }

  private readonly onStreamError = (err: NodeJS.ErrnoException): void => {
    this.streamError = err.code ?? err.message;
  };

  private readonly onStreamEnd = (): void => {
    const exchange = this.exchange;
    if (exchange?.responseBody instanceof CloseFramer) {
      exchange.responseBody.end();
      this.dropStream();
      this.responseDone(exchange);
      return;
    }
    this.streamGone();
  };

  private readonly onStreamClose = (): void => {
    this.streamGone();
  };

  /** The stream ended or closed: fine between exchanges, a failure in the middle of one. */
  private streamGone(): void {
    const exchange = this.exchange;
    const detail = this.streamError ?? 'the agent closed the stream';
    this.dropStream();
    if (!exchange || this.phase === Phase.Closed) return;
    if (exchange.response) {
      // Cut off mid-body: the client must see a broken response, not a short one.
      this.socket.destroy();
      return;
    }
    // A kept stream may have been closed by the agent's service just as it was reused; a
    // request without a body can safely go again, on a fresh stream.
    const hasBody = exchange.head.chunked || (exchange.head.contentLength ?? 0) > 0;
    if (exchange.reused && !exchange.retried && !exchange.answered && !hasBody) {
      exchange.retried = true;
      exchange.reused = false;
      this.connect(exchange);
      return;
    }
    this.badGateway(exchange, detail);
  }

  /** Answer 502 for `exchange` (or break the response if it has begun) and close. */
  private badGateway(exchange: Exchange, detail: string): void {
    this.dropStream();
    if (exchange.answered) {
      this.socket.destroy();
      return;
    }
    const error = INGRESS_ERRORS.tunnelUnreachable;
    exchange.answered = true;
    exchange.meter.request(error.status);
    exchange.done?.(error.status, []);
    this.exchange = undefined;
    this.phase = Phase.Closed;
    this.socket.end(rawErrorResponse(error, routingHost(exchange.head.host) ?? '', detail));
  }

  /** A request body that broke its framing: answer if nothing was sent yet, and close. */
  private breakExchange(exchange: Exchange, error: HeadError): void {
    this.dropStream();
    this.exchange = undefined;
    if (exchange.answered) {
      this.socket.destroy();
      return;
    }
    exchange.meter.request(error.status);
    exchange.done?.(error.status, []);
    this.refuse(error);
  }
}

function ignoreError(): void {}

function uncork(socket: Duplex): void {
  socket.uncork();
}
