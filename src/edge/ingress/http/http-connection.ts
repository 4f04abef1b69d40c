/**
 * One public HTTP/1.x connection on the relay. Request heads are read here (strictly); each
 * request is routed by its own Host (and judged by its endpoint's policy, http-ingress.ts), its
 * head is written into a tunnel stream with `X-Forwarded-*`, and its body and the response are
 * relayed as bytes, by their framing. The connection keeps its tunnel stream while both sides keep
 * alive: no stream per request. A connection that opens with HTTP/2's preface (h2c) goes to the
 * ingress's HTTP/2 side.
 *
 * This class is the connection's life, its request heads and the answers the edge writes itself;
 * it stands on the request's way to the agent (request-relay.ts), which stands on the response
 * side (response-relay.ts), which stands on the tunnel stream the connection holds
 * (connection-stream.ts).
 */
import type { Duplex } from 'node:stream';
import type { Exchange } from './exchange.js';
import { concat, Phase } from './connection-stream.js';
import { bareRefusal, HeadScanner, type HeadError } from './head-syntax.js';
import { routingHost } from './http-forwarding.js';
import { parseRequestHead, type RequestHead } from './request-head.js';
import { RequestRelay } from './request-relay.js';
import { BodyPeek, NO_BODY, type PolicyBodySource } from './body-peek.js';
import type { ResponseHead } from './response-head.js';
import { switchProtocols } from './protocol-switch.js';
import { ROUTING_FAILED, type LeanPage, type LeanRoute, type LeanRouting } from './http-relay.js';
import { errorPage, grpcAnswerOnHttp1, INGRESS_ERRORS, rawAnswer } from '../error-pages.js';
import { isGrpc } from '../grpc-answers.js';
import type { RespondDecision } from '../../../policy/index.js';

/** The first line of HTTP/2's connection preface (RFC 9113 3.4), as an HTTP/1.1 parser sees it. */
const H2C_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n', 'latin1');

/**
 * Whether `buf` begins with the HTTP/2 connection preface's first line.
 * @example startsH2c(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')) // true
 */
function startsH2c(buf: Buffer): boolean {
  const n = H2C_PREFACE.length;
  // Asked of every request head the relay reads: one byte settles it for all but P… methods.
  return buf[0] === 0x50 && buf.length >= n && buf.compare(H2C_PREFACE, 0, n, 0, n) === 0;
}

/** Whether a request's headers (`raw`) ask for `100 Continue` before the body. */
function expectsContinue(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 6 && raw[i]!.toLowerCase() === 'expect') {
      return raw[i + 1]!.trim().toLowerCase() === '100-continue';
    }
  }
  return false;
}

/**
 * Whether Node's Readable schedules `maybeReadMore` (a tick, then `read(0)`) after each read of
 * `socket`. Its only effect on a socket is a `_read` that restarts a handle which stopped reading,
 * and `read()` does that itself whenever the relay resumes a paused socket; so while the relay
 * serves the socket, it is a tick per request for nothing (issue 29). Marking it as already
 * scheduled turns it off; whoever the socket is handed to gets it back.
 */
function readAheadTicks(socket: Duplex, on: boolean): void {
  const state = (socket as { _readableState?: { readingMore?: boolean } })._readableState;
  if (state && typeof state.readingMore === 'boolean') state.readingMore = !on;
}

/** The edge's page for a request whose target it reads no single way; the connection closes. */
function targetPage(problem: string): LeanPage {
  return { page: INGRESS_ERRORS.badRequestTarget, detail: problem, close: true };
}

/** Public bytes held while a response is pending (pipelined requests) before reads pause. */
const MAX_BUFFERED = 256 * 1024;

/**
 * @example new HttpConnection(socket, context).start();
 */
export class HttpConnection extends RequestRelay {
  private readonly scanner = new HeadScanner();
  private headTimer: NodeJS.Timeout | undefined;
  /** The body of the request being routed, while its policy reads it (body-peek.ts). */
  private peek: BodyPeek | undefined;

  start(): void {
    const socket = this.socket;
    socket.on('data', this.onSocketData);
    socket.on('end', this.onSocketEnd);
    socket.on('close', this.onSocketClose);
    socket.on('error', this.onSocketError);
    socket.on('timeout', this.onSocketTimeout);
    (socket as Duplex & { setTimeout(ms: number): void }).setTimeout(this.ctx.keepAliveTimeoutMs);
    readAheadTicks(socket, false);
  }

  /** Close now if no request is under way (draining); otherwise after the current response. */
  closeIfIdle(): void {
    if (this.phase === Phase.Head && this.exchange === undefined && !this.buffered?.length) {
      this.socket.end();
    }
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
      case Phase.Routing:
      case Phase.Connecting:
      case Phase.Waiting:
        if (this.peek) {
          // A body the policy reads before it decides on the route.
          this.peek.feed(chunk);
          if (this.peek.overfull(MAX_BUFFERED)) this.socket.pause();
          return;
        }
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
    this.peek?.fail(new Error('the client ended the body early'));
    if (this.phase === Phase.Head && this.exchange === undefined) {
      this.socket.end();
      return;
    }
    // A client that half-closes before its answer has begun has left (nginx's 499): waiting on
    // would hold the agent's stream, and its connection to the service, until the service answers.
    if (this.exchange && !this.exchange.response) this.socket.destroy();
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
    this.peek?.fail(new Error('the client left'));
    this.dropHeldRewrite();
    const exchange = this.exchange;
    if (exchange) {
      exchange.transforms?.destroy();
      exchange.requestTransforms?.destroy();
      // 499: the client went away before the answer (nginx's convention).
      const status = exchange.response?.status ?? 499;
      exchange.count(status);
      exchange.done?.(status, exchange.response?.raw ?? []);
      this.exchange = undefined;
      this.abandonStream();
    } else {
      this.parkStream();
    }
    this.ctx.closed(this);
  };

  protected readHead(): void {
    const buf = this.buffered!;
    if (startsH2c(buf)) {
      // HTTP/2 with prior knowledge (h2c): the ingress serves it (h2-ingress.ts).
      this.parkStream();
      this.ctx.h2c(this.socket, this.leave()!);
      return;
    }
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
      const refused = head.refusedTarget;
      if (!refused) this.refuse(head);
      else this.routed(refused, routingHost(refused.host), end, targetPage(head.reason));
      return;
    }
    const host = routingHost(head.host);
    const body = head.chunked || head.contentLength ? this.bodySource(head, end) : NO_BODY;
    const route = this.ctx.route(head, host, this.socket, body);
    if (route instanceof Promise) {
      // Bytes that come meanwhile wait in `buffered` after this head, for the next request.
      this.phase = Phase.Routing;
      route.then(
        (routed) => this.routed(head, host, end, routed),
        () => this.routed(head, host, end, ROUTING_FAILED),
      );
      return;
    }
    this.routed(head, host, end, route);
  }

  /**
   * The body of the request whose head ends at `end` of `buffered`, for a policy that reads it
   * before deciding: read from the bytes held and those that come while the route is awaited.
   */
  private bodySource(head: RequestHead, end: number): PolicyBodySource {
    let peek: BodyPeek | undefined;
    const start = (): BodyPeek => {
      if (peek) return peek;
      peek = new BodyPeek(head, () => setImmediate(() => this.socket.destroy()));
      this.peek = peek;
      // The client waits for this before it sends the body.
      if (head.minor === 1 && expectsContinue(head.raw)) {
        this.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
      }
      const held = this.buffered!;
      if (held.length > end) peek.parse(held.subarray(end));
      return peek;
    };
    return { read: () => start().body, trailers: () => peek?.trailers() ?? NO_BODY.trailers() };
  }

  /** Serve the request whose head ends at `end` of `buffered` where `route` says. */
  private routed(
    head: RequestHead,
    host: string | undefined,
    end: number,
    route: LeanRouting,
  ): void {
    if (this.phase === Phase.Closed) return;
    this.phase = Phase.Head;
    const peek = this.peek;
    if (peek) {
      // The body's bytes as sent go on after the head: relayed, or handed over with it.
      this.peek = undefined;
      peek.fail(new Error('the request was decided'));
      if (peek.raw.length > 0) this.buffered = Buffer.concat([this.buffered!, ...peek.raw]);
    }
    if (this.clientEnded) {
      // It left while the policy decided (nginx's 499): nothing is sent on its behalf.
      this.socket.destroy();
      return;
    }
    const buf = this.buffered!;
    this.buffered = end < buf.length ? buf.subarray(end) : undefined;
    if ('edge' in route) this.afterAnswer(this.writeAnswer(head, route.edge).close);
    else if ('page' in route) this.page(head, host ?? '', route);
    else if (route.close) this.closeByPolicy(head, host ?? '', route);
    else if (route.answer) this.answer(head, host ?? '', route, route.answer);
    else this.begin(head, host ?? '', route);
  }

  /** Write the policy's own answer to the request, counted and recorded as the endpoint's. */
  private answer(head: RequestHead, host: string, route: LeanRoute, d: RespondDecision): void {
    const exchange = this.exchangeFor(head, host, route, undefined);
    // A gRPC client reads a refusal as a status; it is counted as the refusal it is.
    const grpc = d.status >= 300 && isGrpc(head.contentType);
    const written = this.writeAnswer(head, grpc ? grpcAnswerOnHttp1({ answer: d }) : d);
    exchange.bodies?.response.add(Buffer.from(written.body));
    exchange.count(d.status, (performance.now() - exchange.started) / 1000);
    if (exchange.state) this.ctx.connections.countBytes(exchange.state);
    exchange.done?.(d.status, written.raw);
    this.afterAnswer(written.close);
  }

  /**
   * The policy closes the connection without an answer: counted as the endpoint's, as a client
   * that got no answer (499), as nginx counts it.
   */
  private closeByPolicy(head: RequestHead, host: string, route: LeanRoute): void {
    const exchange = this.exchangeFor(head, host, route, undefined);
    exchange.count(499, (performance.now() - exchange.started) / 1000);
    exchange.done?.(499, []);
    this.phase = Phase.Closed;
    this.parkStream();
    // The answers before it go out first (pipelined requests); nothing more is read.
    this.socket.pause();
    this.socket.end();
    this.socket.once('finish', () => this.socket.destroy());
  }

  /** Write the edge's own page for a request no endpoint serves, counted as unrouted. */
  private page(head: RequestHead, host: string, route: LeanPage): void {
    const error = route.page;
    const page = isGrpc(head.contentType)
      ? grpcAnswerOnHttp1({ error, host, detail: route.detail })
      : errorPage(error, host, head.accept, route.detail);
    const written = this.writeAnswer(head, page, route.close);
    this.ctx.meters.unrouted.request(error.status);
    this.afterAnswer(written.close);
  }

  /**
   * Write an answer the edge made itself; the connection is to close after it when the request
   * had a body, which the relay never reads, or was an upgrade.
   */
  private writeAnswer(
    head: RequestHead,
    answer: Pick<RespondDecision, 'status' | 'headers' | 'body' | 'refusal'>,
    closing = false,
  ): { raw: string[]; body: string; close: boolean } {
    // After a refused upgrade the client's next bytes may be anything (its new protocol's).
    const close =
      closing ||
      head.chunked ||
      (head.contentLength ?? 0) > 0 ||
      head.close ||
      head.upgrade ||
      this.clientEnded ||
      this.ctx.draining;
    const bytes = rawAnswer(answer, {
      close,
      accept: head.accept,
      method: head.method,
      http10: head.minor === 0,
    });
    this.socket.write(bytes.head, 'latin1');
    if (bytes.body !== '') this.socket.write(bytes.body);
    return { raw: bytes.raw, body: bytes.body, close };
  }

  /** After an answer: close, or read the next request. */
  private afterAnswer(close: boolean): void {
    if (close) {
      this.phase = Phase.Closed;
      this.parkStream();
      this.socket.end();
      return;
    }
    this.socket.resume();
    // On the next turn: a pipeline of requests the edge answers must not recurse.
    if (this.buffered?.length) setImmediate(this.readPipelined);
  }

  private readonly readPipelined = (): void => {
    if (this.phase === Phase.Head && this.exchange === undefined && this.buffered?.length) {
      this.readHead();
    }
  };

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
  protected refuse(error: HeadError): void {
    if (error.limit) this.ctx.onLimit(this.ip, error.limit);
    this.phase = Phase.Closed;
    this.parkStream();
    this.socket.end(bareRefusal(error.status));
  }

  protected switchProtocols(
    exchange: Exchange,
    response: ResponseHead,
    rest: Buffer | undefined,
  ): void {
    if (exchange.requestBody) {
      // An upgrade's body goes before the switch; bytes of it still to come could not be told
      // from the new protocol's.
      this.badGateway(exchange, 'a 101 before the whole request body was sent');
      return;
    }
    const stream = this.release()!;
    this.exchange = undefined;
    exchange.switched(response.raw);
    const held = this.leave();
    // The raw relay has its own idle limits.
    (this.socket as Duplex & { setTimeout(ms: number): void }).setTimeout(0);
    switchProtocols(this.ctx.raw, this.socket, stream, exchange.meter, {
      headers: response.raw,
      fromAgent: rest,
      fromClient: held,
    });
  }

  /** Stop serving the socket (another owner takes it); returns what was read and not served. */
  private leave(): Buffer | undefined {
    const socket = this.socket;
    this.phase = Phase.Closed;
    clearTimeout(this.headTimer);
    socket.off('data', this.onSocketData);
    socket.off('end', this.onSocketEnd);
    socket.off('close', this.onSocketClose);
    socket.off('error', this.onSocketError);
    socket.off('timeout', this.onSocketTimeout);
    readAheadTicks(socket, true);
    this.ctx.closed(this);
    const buffered = this.buffered;
    this.buffered = undefined;
    return buffered;
  }
}
