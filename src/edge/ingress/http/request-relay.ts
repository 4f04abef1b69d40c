/**
 * The request side of a relay connection, once a request is routed to an endpoint: the exchange
 * begins, the request's head goes into the tunnel stream (with `X-Forwarded-*` and the policy's
 * changes), or opens an HTTP/2 call to a service that speaks HTTP/2 (h2-bridge.ts), and the body
 * follows as bytes by its framing, through request-body-find-replace's rewrite when the policy
 * asks (an HTTP/1.0 body held whole first, held-rewrite.ts).
 *
 * The third layer of HttpConnection (http-connection.ts), on the response side
 * (response-relay.ts) and the tunnel stream (connection-stream.ts).
 */
import type { Duplex } from 'node:stream';
import type { BodyRewrite } from '../../../policy/index.js';
import { startSpan, type SpanContext } from '../../metrics/trace-context.js';
import { ChunkedFramer } from './body-framing.js';
import { BodyTransforms, rewriter } from './body-transforms.js';
import { Phase } from './connection-stream.js';
import {
  agentRequestHead,
  beginExchange,
  h2CallHeaders,
  requestFramer,
  withLength,
  type Exchange,
} from './exchange.js';
import { H2Bridge } from './h2-bridge.js';
import type { HeadError } from './head-syntax.js';
import { HeldRewrite } from './held-rewrite.js';
import { rewrittenHost } from './http-forwarding.js';
import type { LeanRoute } from './http-relay.js';
import type { RequestHead } from './request-head.js';
import { ResponseRelay } from './response-relay.js';

export abstract class RequestRelay extends ResponseRelay {
  /** An HTTP/1.0 request's rewritten body, held until its length is known (held-rewrite.ts). */
  private heldRewrite: HeldRewrite | undefined;

  /** Answer a request the relay will not read, and close. */
  protected abstract refuse(error: HeadError): void;

  /** Send the routed request to its endpoint's agent, on the connection's tunnel stream. */
  protected begin(head: RequestHead, host: string, route: LeanRoute): void {
    // Made only while traces are exported: otherwise the request goes on as it came.
    const span = this.ctx.tracing() ? startSpan(head.raw) : undefined;
    const exchange = this.exchangeFor(head, host, route, span);
    this.exchange = exchange;
    this.sendOnStream(exchange);
  }

  /** The exchange of a routed request: its endpoint's meters, the inspector's record. */
  protected exchangeFor(
    head: RequestHead,
    host: string,
    route: LeanRoute,
    span: SpanContext | undefined,
  ): Exchange {
    const start = { head, host, route, scheme: this.proto, clientIp: this.ip, span };
    return beginExchange(this.ctx, this.socket, start);
  }

  protected send(exchange: Exchange): void {
    const stream = this.stream!;
    exchange.sentAt = performance.now();
    const { policy, span, sent } = exchange;
    if (stream instanceof H2Bridge) {
      // A service that speaks HTTP/2: the call opens with the request's headers; a body a policy
      // rewrites goes chunked (rewriteRequestBody), any other as the client framed it.
      const chunked = sent.chunked || (policy?.bodyRewrite !== undefined && !!sent.contentLength);
      const framing = { method: sent.method, minor: sent.minor, chunked };
      stream.start(h2CallHeaders(exchange, this.proto, this.ip), {
        ...framing,
        contentLength: chunked ? undefined : sent.contentLength,
      });
    } else if (sent.minor === 0 && policy?.bodyRewrite && exchange.requestBody) {
      this.holdRewrittenBody(exchange, stream);
    } else {
      const host = rewrittenHost(exchange.tunnel);
      stream.write(agentRequestHead(sent, this.proto, this.ip, host, policy, span), 'latin1');
    }
    const rest = this.buffered;
    this.buffered = undefined;
    if (exchange.requestBody) {
      if (policy?.bodyRewrite) this.rewriteRequestBody(exchange, policy.bodyRewrite, stream);
      this.phase = Phase.Body;
      if (rest) this.relayRequestBody(rest);
    } else {
      this.phase = Phase.Waiting;
      this.buffered = rest;
    }
    // Unless the first body bytes already filled the stream: then its 'drain' resumes reading.
    if (!this.streamFull) this.socket.resume();
  }

  /** Bytes of the request body, relayed by its framing (and rewritten, when the policy says). */
  protected relayRequestBody(chunk: Buffer): void {
    const exchange = this.exchange!;
    const framer = exchange.requestBody!;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      this.breakExchange(exchange, { status: 400, reason: n });
      return;
    }
    const body = n === chunk.length ? chunk : chunk.subarray(0, n);
    // The inspector's copy; a chunked body's is taken decoded, by the framer (beginExchange).
    if (exchange.bodies && body.length > 0 && !(framer instanceof ChunkedFramer)) {
      exchange.bodies.request.add(body);
    }
    const transforms = exchange.requestTransforms;
    if (transforms) {
      // A chunked body reaches the rewrite decoded, through the framer's parts.
      if (body.length > 0 && !(framer instanceof ChunkedFramer)) transforms.write(body);
    } else if (body.length > 0 && !this.stream!.write(body)) {
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
    if (transforms) {
      // Sent once the rewrite's last bytes are.
      transforms.end(() => {
        this.heldRewrite?.flush();
        this.heldRewrite = undefined;
        exchange.requestTransforms = undefined;
        if (this.exchange === exchange && exchange.responded) this.finish(exchange);
      });
      return;
    }
    if (exchange.responded) this.finish(exchange);
  }

  /**
   * request-body-find-replace: the body goes to the agent through `rewrite`, chunked (its head
   * said so, exchange.ts agentRequestHead).
   */
  private rewriteRequestBody(exchange: Exchange, rewrite: BodyRewrite, stream: Duplex): void {
    const sink = this.heldRewrite ?? stream;
    const body = new BodyTransforms([rewriter(rewrite)], sink, sink === stream, this.socket, () =>
      this.socket.destroy(),
    );
    exchange.requestTransforms = body;
    if (exchange.head.chunked) {
      const capture = exchange.bodies?.request;
      exchange.requestBody = requestFramer(exchange.head, (bytes) => {
        capture?.add(bytes);
        body.write(bytes);
      });
    }
  }

  /**
   * An HTTP/1.0 request whose body the policy rewrites: HTTP/1.0 has no chunked coding, so its
   * head goes once the rewritten body is whole, with that body's length (held-rewrite.ts).
   */
  private holdRewrittenBody(exchange: Exchange, stream: Duplex): void {
    const { sent, span } = exchange;
    const { requestHeaders, target } = exchange.policy!;
    this.heldRewrite = new HeldRewrite(
      (body) => {
        const head = { ...sent, raw: withLength(sent.raw, body.length) };
        const host = rewrittenHost(exchange.tunnel);
        const run = { requestHeaders, target };
        stream.write(agentRequestHead(head, this.proto, this.ip, host, run, span), 'latin1');
        stream.write(body);
      },
      (reason) => {
        exchange.requestTransforms?.destroy();
        this.dropHeldRewrite();
        this.breakExchange(exchange, { status: 413, reason });
      },
    );
  }

  /** The held body's bytes go back to the process's budget (the exchange ended early). */
  protected dropHeldRewrite(): void {
    this.heldRewrite?.discard();
    this.heldRewrite = undefined;
  }

  private readonly resumeSocket = (): void => {
    this.streamFull = false;
    if (this.phase !== Phase.Closed) this.socket.resume();
  };

  /** A request body that broke its framing: answer if nothing was sent yet, and close. */
  private breakExchange(exchange: Exchange, error: HeadError): void {
    this.dropStream();
    this.exchange = undefined;
    if (exchange.answered) {
      this.socket.destroy();
      return;
    }
    exchange.count(error.status);
    exchange.done?.(error.status, []);
    this.refuse(error);
  }
}
