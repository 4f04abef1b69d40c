/**
 * An HTTP/2 request on the lean relay's pipeline, carried to an agent that speaks HTTP/1.1. It is
 * read into the same `RequestHead` an HTTP/1.1 request is (h2-head.ts), routed and judged by the
 * same code (http-ingress.ts leanRoute, http-policy-lean.ts; h2-serve.ts sends it here), counted
 * and recorded by the same Exchange, and sent to the agent as the relay sends one: an HTTP/1.1
 * head (exchange.ts agentRequestHead) on a pooled tunnel stream, the body after it
 * (h2-request-body.ts). The agent's response head is read strictly (response-head.ts),
 * on_http_response applied to it, and the answer written back as HTTP/2: headers, the body
 * without its HTTP/1.1 coding (body-framing.ts), trailers.
 *
 * What differs from HTTP/1.1 is only the wire: one public connection carries many exchanges at
 * once, each with its own tunnel stream, and a client that resets its stream releases that stream
 * (stream-release.ts) as a client that hangs up does on HTTP/1.1.
 */
import type { Duplex, Transform } from 'node:stream';
import {
  constants,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Stream,
} from 'node:http2';
import { connectTunnel, proxyInfoOf } from '../../registry/connect-tunnel.js';
import { failureDetail, INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import { ChunkedFramer, type BodyFramer } from './body-framing.js';
import { ignoreError } from './connection-stream.js';
import { captureAnswer, h2Headers, h2Trailers, respondH2, respondPageH2 } from './h2-head.js';
import { H2RequestBody } from './h2-request-body.js';
import { agentRequestHead, CloseFramer, responseFramer, type Exchange } from './exchange.js';
import { rewrittenHost, routingHost } from './http-forwarding.js';
import { switchH2Stream } from './protocol-switch.js';
import {
  awaitResponsePhase,
  leanResponseHeaders,
  type ResponseAfterPhase,
} from './lean-response-phase.js';
import { POLICY_FAILED_ANSWER } from './http-policy-writes.js';
import type { HttpRelayContext } from './http-relay.js';
import type { ResponseHead } from './response-head.js';
import { releaseAbandoned } from './stream-release.js';
import { BodyTransforms } from './body-transforms.js';

/**
 * @example new H2Exchange(ctx, req, res, socket, exchange, 'https', clientIp).start();
 */
export class H2Exchange {
  private stream: Duplex | undefined;
  private response: ResponseHead | undefined;
  private responseBody: BodyFramer | undefined;
  /** The request's body on its way to the agent; none without one. */
  private readonly requestBody: H2RequestBody | undefined;
  private readonly trailers: string[] = [];
  /** The exchange is over (answered in full, failed, or its client gone). */
  private finished = false;
  /** Bytes came after the response: the stream cannot carry another exchange. */
  private spoiled = false;
  /** The client's stream refused a write: the tunnel stream waits for its 'drain'. */
  private clientFull = false;
  /** The body's transforms, when the policy changes it on its way (body-transforms.ts). */
  private transforms: BodyTransforms | undefined;
  /** The agent's response is read; the transforms are writing their last bytes. */
  private flushing = false;
  private readonly h2: ServerHttp2Stream;
  private readonly poolKey: string;

  constructor(
    private readonly ctx: HttpRelayContext,
    private readonly req: Http2ServerRequest,
    private readonly res: Http2ServerResponse,
    private readonly socket: Duplex,
    private readonly exchange: Exchange,
    private readonly proto: 'http' | 'https',
    private readonly ip: string,
  ) {
    this.h2 = req.stream;
    this.poolKey = `${proto} ${ip}`;
    const head = exchange.head;
    if (head.chunked || head.contentLength) {
      this.requestBody = new H2RequestBody(req, exchange, (detail) => this.fail(detail));
    }
  }

  /** Whether the whole request reached the tunnel stream. */
  private get requestSent(): boolean {
    return this.requestBody === undefined || this.requestBody.sent;
  }

  start(): void {
    this.h2.once('close', this.onClientClose);
    const tunnel = this.exchange.tunnel;
    // A stream of a ProxyProto tunnel began with another connection's PROXY header: never reused.
    const pooled = tunnel.proxyProto ? undefined : this.ctx.pool.take(tunnel, this.poolKey);
    if (pooled) {
      this.exchange.reused = true;
      this.adopt(pooled);
      return;
    }
    this.connect();
  }

  private connect(): void {
    const info = proxyInfoOf(this.socket, this.proto, false);
    connectTunnel(this.exchange.tunnel, info, this.ctx.connectTimeoutMs).then(
      (stream) => {
        if (this.finished) {
          // The client left while the stream opened; the agent may have dialled its service.
          releaseAbandoned(stream, this.ctx.released);
          return;
        }
        this.adopt(stream);
      },
      (err: NodeJS.ErrnoException) => this.fail(failureDetail(err)),
    );
  }

  private adopt(stream: Duplex): void {
    this.stream = stream;
    if (!stream.listeners('error').includes(ignoreError)) stream.on('error', ignoreError);
    stream.on('data', this.onStreamData);
    stream.on('end', this.onStreamEnd);
    stream.on('close', this.onStreamClose);
    stream.resume();
    this.send(stream);
  }

  private send(stream: Duplex): void {
    const { exchange } = this;
    exchange.sentAt = performance.now();
    const host = rewrittenHost(exchange.tunnel);
    const text = agentRequestHead(
      exchange.sent,
      this.proto,
      this.ip,
      host,
      exchange.policy,
      exchange.span,
    );
    stream.write(text, 'latin1');
    this.requestBody?.send(stream);
  }

  private readonly onStreamData = (chunk: Buffer): void => {
    if (this.finished) return;
    if (this.responseBody) this.relayBody(chunk);
    else this.readHead(chunk);
  };

  private readHead(chunk: Buffer): void {
    const { exchange } = this;
    const read = exchange.takeResponseHead(chunk);
    if (read === undefined) return;
    if (typeof read === 'string') {
      this.fail(read);
      return;
    }
    const { response, rest } = read;
    if (response.status === 101 && exchange.head.upgrade) {
      this.switchStream(response, rest);
      return;
    }
    if (response.status < 200) {
      // 100 Continue, 103 Early Hints: HTTP/2 clients need none of them; the final one follows.
      if (response.status === 101) this.fail('a protocol switch the request did not ask for');
      else if (rest) this.readHead(rest);
      return;
    }
    if (exchange.head.upgrade && response.status < 300) {
      // RFC 8441: a 2xx to an extended CONNECT opens the tunnel; the service did not.
      this.fail(`the service answered the upgrade ${response.status}, without switching protocols`);
      return;
    }
    exchange.upstreamAt = performance.now();
    const phase = exchange.policy?.response;
    if (!phase) {
      this.answerHead(response, rest, undefined);
      return;
    }
    const after = leanResponseHeaders(phase, response.status, response.raw);
    if (!(after instanceof Promise)) {
      this.afterResponsePhase(response, rest, after);
      return;
    }
    awaitResponsePhase(
      after,
      this.stream!,
      (settled) => this.afterResponsePhase(response, rest, settled),
      { over: () => this.finished, holds: () => !this.finished },
    );
  }

  /**
   * The agent took the upgrade of an extended CONNECT (RFC 8441): the client's stream and the
   * tunnel stream become a raw relay (protocol-switch.ts), counted as the switch it is (101).
   */
  private switchStream(response: ResponseHead, rest: Buffer | undefined): void {
    const { exchange } = this;
    const stream = this.release()!;
    this.finished = true;
    exchange.answered = true;
    exchange.switched(response.raw);
    const headers = h2Headers(response);
    switchH2Stream(this.ctx.raw, this.h2, this.socket, stream, exchange.meter, {
      headers,
      fromAgent: rest,
    });
  }

  private afterResponsePhase(
    response: ResponseHead,
    rest: Buffer | undefined,
    after: ResponseAfterPhase,
  ): void {
    if (!after || 'problem' in after) {
      if (after) this.answerInstead(INGRESS_ERRORS.unsafeResponseHead, after.problem);
      else this.answerWith(POLICY_FAILED_ANSWER);
      return;
    }
    if ('answer' in after) {
      // custom-response replaced the agent's answer; its body is not read: the stream goes.
      this.answerWith(after.answer);
      return;
    }
    response.raw = after.headers;
    this.answerHead(response, rest, after.transforms);
  }

  /** Answer with `response`'s head, then relay the body that came with it. */
  private answerHead(
    response: ResponseHead,
    rest: Buffer | undefined,
    transforms: readonly Transform[] | undefined,
  ): void {
    this.respond(response, transforms);
    if (this.finished) return;
    if (rest) this.relayBody(rest);
    else if (this.responseBody!.done) this.done();
  }

  /** Answer the client with `response`'s head; its body through `transforms`, if any. */
  private respond(response: ResponseHead, transforms: readonly Transform[] | undefined): void {
    const { h2, exchange } = this;
    const framing = response.framing;
    this.response = response;
    exchange.response = response;
    // A chunked body is decoded for HTTP/2 (its data and trailers); other framings as on HTTP/1.1.
    this.responseBody =
      framing.kind === 'chunked'
        ? new ChunkedFramer({ data: this.body, trailer: (line) => this.trailers.push(line) })
        : responseFramer(framing);
    if (transforms?.length && framing.kind !== 'none') {
      this.transforms = new BodyTransforms(transforms, h2, false, this.stream!, () =>
        this.breakAnswer(),
      );
    }
    try {
      h2.respond(h2Headers(response), {
        endStream: framing.kind === 'none',
        waitForTrailers: framing.kind === 'chunked',
      });
    } catch (err) {
      // Node refuses a header it cannot send on HTTP/2 (a name HTTP/1.1 allows and it does not).
      this.answerInstead(INGRESS_ERRORS.unsafeResponseHead, (err as Error).message);
      return;
    }
    exchange.answered = true;
    exchange.answeredAt = performance.now();
  }

  /** Response body bytes (decoded, for a chunked body): to the transforms, or to the client. */
  private readonly body = (bytes: Buffer): void => {
    this.exchange.bodies?.response.add(bytes);
    if (this.transforms) this.transforms.write(bytes);
    else this.write(bytes);
  };

  /** Bytes for the client. */
  private readonly write = (bytes: Buffer): void => {
    if (!this.h2.write(bytes) && !this.clientFull) {
      this.clientFull = true;
      this.stream?.pause();
      this.h2.once('drain', this.resumeStream);
    }
  };

  private readonly resumeStream = (): void => {
    this.clientFull = false;
    this.stream?.resume();
  };

  private relayBody(chunk: Buffer): void {
    const framer = this.responseBody!;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      this.breakAnswer();
      return;
    }
    if (!(framer instanceof ChunkedFramer) && n > 0) {
      this.body(n === chunk.length ? chunk : chunk.subarray(0, n));
    }
    if (n < chunk.length) this.spoiled = true;
    // A response that ends before its request body does: the rest of that body is not read.
    if (framer.done) this.done();
  }

  /**
   * The agent's response is all read: the tunnel stream is kept if it can carry another exchange,
   * and the answer ends once the transforms, if any, have written their last bytes.
   */
  private done(): void {
    if (this.finished || this.flushing) return;
    this.keepStream();
    const transforms = this.transforms;
    if (!transforms) {
      this.end();
      return;
    }
    this.flushing = true;
    transforms.end(() => this.end());
  }

  /** The client has the whole answer: end it, and count it. */
  private end(): void {
    if (this.finished) return;
    this.finished = true;
    const { exchange } = this;
    const response = this.response!;
    if (response.framing.kind === 'chunked') this.res.addTrailers(h2Trailers(this.trailers));
    if (response.framing.kind !== 'none') this.h2.end();
    exchange.completed(this.ctx.connections);
  }

  /** Give the tunnel stream back to the pool when it can carry another exchange. */
  private keepStream(): void {
    const { exchange } = this;
    const response = this.response!;
    const stream = this.release();
    if (!stream) return;
    const clean =
      this.requestSent && !this.spoiled && !response.close && !exchange.tunnel.proxyProto;
    if (clean && !stream.destroyed && !stream.readableEnded) {
      this.ctx.pool.put(exchange.tunnel, this.poolKey, stream);
    } else {
      stream.destroy();
    }
  }

  private readonly onStreamEnd = (): void => {
    const body = this.responseBody;
    if (body instanceof CloseFramer && !this.finished) {
      body.end();
      this.done();
      return;
    }
    this.streamGone();
  };

  private readonly onStreamClose = (): void => {
    this.streamGone();
  };

  /** The stream ended or closed before the exchange did: retried once when safe, else a 502. */
  private streamGone(): void {
    if (this.finished) return;
    const { exchange } = this;
    this.release()?.destroy();
    // A kept stream may have been closed by the agent's service just as it was reused; a request
    // without a body can safely go again, on a fresh stream.
    const hasBody = exchange.head.chunked || (exchange.head.contentLength ?? 0) > 0;
    if (exchange.reused && !exchange.retried && !exchange.answered && !hasBody) {
      exchange.retried = true;
      exchange.reused = false;
      exchange.responseScanner.reset();
      exchange.pendingHead = undefined;
      this.connect();
      return;
    }
    this.fail('the agent closed the stream');
  }

  /** The client reset or closed its stream: the exchange ends, its stream given up at once. */
  private readonly onClientClose = (): void => {
    if (this.finished) return;
    this.finished = true;
    this.transforms?.destroy();
    this.requestBody?.destroy();
    const { exchange } = this;
    // 499: the client went away before the answer (nginx's convention).
    const status = this.response?.status ?? 499;
    exchange.count(status);
    exchange.done?.(status, this.response?.raw ?? []);
    const stream = this.release();
    if (stream) releaseAbandoned(stream, this.ctx.released);
  };

  /** A failure: a 502 when nothing was answered yet, else the client's stream is reset. */
  private fail(detail: string): void {
    if (this.finished) return;
    if (this.exchange.answered) this.breakAnswer();
    else this.answerInstead(INGRESS_ERRORS.tunnelUnreachable, detail);
  }

  private answerInstead(error: IngressError, detail: string): void {
    this.finished = true;
    this.release()?.destroy();
    const { exchange } = this;
    exchange.answered = true;
    exchange.count(error.status);
    const host = routingHost(exchange.head.host) ?? '';
    // Written before the inspector is told: `done?.(…)` would skip its arguments without one.
    const raw = respondPageH2(this.h2, error, host, exchange.head, detail);
    exchange.done?.(error.status, raw);
  }

  /** Answer with the edge's own `answer` instead of the agent's. */
  private answerWith(answer: {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: string;
  }): void {
    this.finished = true;
    this.release()?.destroy();
    const { exchange } = this;
    exchange.answered = true;
    exchange.count(answer.status);
    const raw = respondH2(this.h2, answer, exchange.head);
    captureAnswer(exchange, answer);
    exchange.done?.(answer.status, raw);
  }

  /** Part of the answer went out: the client must see it broken, not short. */
  private breakAnswer(): void {
    if (this.finished) return;
    this.transforms?.destroy();
    this.requestBody?.destroy();
    this.finished = true;
    this.release()?.destroy();
    const status = this.response?.status ?? 502;
    this.exchange.count(status);
    this.exchange.done?.(status, this.response?.raw ?? []);
    this.h2.close(constants.NGHTTP2_INTERNAL_ERROR);
  }

  private release(): Duplex | undefined {
    const stream = this.stream;
    if (!stream) return undefined;
    stream.off('data', this.onStreamData);
    stream.off('end', this.onStreamEnd);
    stream.off('close', this.onStreamClose);
    this.requestBody?.detach();
    this.stream = undefined;
    return stream;
  }
}
