/**
 * An HTTP/2 request on the relay's pipeline to an endpoint bound with app protocol `http2` (gRPC
 * services behind `@ngrok/ngrok`'s `.appProtocol('http2')`): routed and judged as every request
 * (http-ingress.ts leanRoute), counted and recorded by the same Exchange, and sent on as a stream
 * of the connection's HTTP/2 session to the service (h2-upstream.ts H2Upstreams). The call is
 * relayed frame for frame: headers (on_http_response applied to them), data with back-pressure
 * both ways, trailers, and a reset from either side passed to the other, so a gRPC call stays one
 * call: streaming, deadlines and cancellation included.
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { Http2ServerRequest, Http2ServerResponse, ServerHttp2Stream } from 'node:http2';
import type { Duplex, Transform } from 'node:stream';
import { failureDetail, INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import { proxyInfoOf } from '../../registry/connect-tunnel.js';
import { BodyTransforms, rewriter } from './body-transforms.js';
import type { BodyRewrite } from '../../../policy/index.js';
import { h2CallHeaders, type Exchange } from './exchange.js';
import { rawOf, type H2Upstreams } from './h2-upstream.js';
import { h2Headers, respondH2, respondPageH2 } from './h2-head.js';
import { routingHost } from './http-forwarding.js';
import {
  awaitResponsePhase,
  leanResponseHeaders,
  type ResponseAfterPhase,
} from './lean-response-phase.js';
import { POLICY_FAILED_ANSWER } from './http-policy-writes.js';
import type { HttpRelayContext } from './http-relay.js';
import type { ResponseHead } from './response-head.js';

const { NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_NO_ERROR } = constants;

/**
 * @example new H2Call(ctx, upstreams, req, res, socket, exchange, 'https', clientIp).start();
 */
export class H2Call {
  private upstream: ClientHttp2Stream | undefined;
  /** The call is over (answered in full, failed, or its client gone). */
  private finished = false;
  private response: ResponseHead | undefined;
  private transforms: BodyTransforms | undefined;
  private trailers: IncomingHttpHeaders | undefined;
  private readonly h2: ServerHttp2Stream;

  constructor(
    private readonly ctx: HttpRelayContext,
    private readonly upstreams: H2Upstreams,
    private readonly req: Http2ServerRequest,
    private readonly res: Http2ServerResponse,
    private readonly socket: Duplex,
    private readonly exchange: Exchange,
    private readonly proto: 'http' | 'https',
    private readonly ip: string,
  ) {
    this.h2 = req.stream;
  }

  start(): void {
    const { exchange, h2 } = this;
    h2.once('close', this.onClientClose);
    const tunnel = exchange.tunnel;
    const headers = h2CallHeaders(exchange, this.proto, this.ip);
    const info = proxyInfoOf(this.socket, this.proto, false);
    exchange.sentAt = performance.now();
    this.upstreams.request(tunnel, this.socket, info, headers, h2.endAfterHeaders).then(
      (upstream) => this.adopt(upstream),
      (err: NodeJS.ErrnoException) =>
        this.fail(INGRESS_ERRORS.tunnelUnreachable, failureDetail(err)),
    );
  }

  private adopt(upstream: ClientHttp2Stream): void {
    if (this.finished) {
      upstream.close(NGHTTP2_CANCEL);
      return;
    }
    this.upstream = upstream;
    upstream.on('response', this.onResponse);
    upstream.on('trailers', (trailers: IncomingHttpHeaders) => (this.trailers = trailers));
    upstream.on('error', () => undefined);
    upstream.once('close', this.onUpstreamClose);
    // The request's body, with back-pressure both ways (a client-streaming call).
    const held = this.exchange.heldBody;
    const rewrite = this.exchange.policy?.bodyRewrite;
    if (rewrite && (held || !this.h2.endAfterHeaders)) {
      this.rewriteBody(upstream, rewrite, held);
    } else if (held) {
      // Read whole for the policy: it goes as one piece, the stream it came on spent.
      this.exchange.bodies?.request.add(held);
      upstream.end(held);
    } else if (!this.h2.endAfterHeaders) {
      const capture = this.exchange.bodies?.request;
      // A second reader of the piped body: it sees the same chunks, and holds nothing back.
      if (capture) this.req.on('data', (chunk: Buffer) => capture.add(chunk));
      this.req.pipe(upstream);
    }
  }

  /**
   * request-body-find-replace: the body goes to the service through the rewrite (its length
   * dropped from the headers, agentRequestHeaders), `held` when a policy read it whole.
   */
  private rewriteBody(upstream: ClientHttp2Stream, rewrite: BodyRewrite, held?: Buffer): void {
    const body = new BodyTransforms([rewriter(rewrite)], upstream, false, this.req, () =>
      this.reset(NGHTTP2_INTERNAL_ERROR),
    );
    const capture = this.exchange.bodies?.request;
    const ended = (): void => body.end(() => upstream.end());
    if (held) {
      capture?.add(held);
      body.write(held);
      ended();
      return;
    }
    this.req.on('data', (chunk: Buffer) => {
      capture?.add(chunk);
      body.write(chunk);
    });
    this.req.once('end', ended);
  }

  private readonly onResponse = (headers: IncomingHttpHeaders): void => {
    const { exchange } = this;
    const status = Number(headers[':status'] ?? 502);
    exchange.upstreamAt = performance.now();
    const raw = rawOf(headers);
    const phase = exchange.policy?.response;
    if (!phase) {
      this.answer(status, raw, undefined);
      return;
    }
    const after = leanResponseHeaders(phase, status, raw);
    if (!(after instanceof Promise)) {
      this.afterResponsePhase(status, after);
      return;
    }
    // The service's stream stays ours whatever the answer: an answer instead of it closes it.
    const held = { over: () => this.finished, holds: () => true };
    awaitResponsePhase(
      after,
      this.upstream!,
      (settled) => {
        this.afterResponsePhase(status, settled);
      },
      held,
    );
  };

  private afterResponsePhase(status: number, after: ResponseAfterPhase): void {
    if (!after) {
      this.answerInstead(POLICY_FAILED_ANSWER.status, () => this.respond(POLICY_FAILED_ANSWER));
      return;
    }
    if ('problem' in after) {
      this.fail(INGRESS_ERRORS.unsafeResponseHead, after.problem);
      return;
    }
    if ('answer' in after) {
      this.answerInstead(after.answer.status, () => this.respond(after.answer));
      return;
    }
    this.answer(status, after.headers, after.transforms);
  }

  /** Answer with the service's response head (`raw` after the policy), then relay its body. */
  private answer(
    status: number,
    raw: string[],
    transforms: readonly Transform[] | undefined,
  ): void {
    const { exchange, h2 } = this;
    const upstream = this.upstream!;
    const response: ResponseHead = {
      status,
      reason: '',
      raw,
      framing: { kind: 'close' },
      close: false,
      upgrade: false,
    };
    this.response = response;
    exchange.response = response;
    // A trailers-only answer (a gRPC status with no message) ends with its headers.
    const endStream = upstream.endAfterHeaders && !transforms?.length;
    try {
      h2.respond(h2Headers(response), { endStream, waitForTrailers: !endStream });
    } catch (err) {
      this.fail(INGRESS_ERRORS.unsafeResponseHead, (err as Error).message);
      return;
    }
    exchange.answered = true;
    exchange.answeredAt = performance.now();
    if (endStream) {
      this.end();
      return;
    }
    const capture = exchange.bodies?.response;
    if (capture) upstream.on('data', (chunk: Buffer) => capture.add(chunk));
    if (transforms?.length) {
      this.transforms = new BodyTransforms(transforms, h2, false, upstream, () =>
        this.reset(NGHTTP2_INTERNAL_ERROR),
      );
      upstream.on('data', (chunk: Buffer) => this.transforms?.write(chunk));
      upstream.once('end', () => this.transforms?.end(() => this.end()));
      return;
    }
    upstream.pipe(h2, { end: false });
    upstream.once('end', () => this.end());
  }

  /**
   * The service's answer is all relayed: end the client's stream with the service's trailers
   * (gRPC's status; Node's response object sends those it holds when the stream asks for them,
   * none as an empty trailing HEADERS), and count the call.
   */
  private end(): void {
    if (this.finished) return;
    this.finished = true;
    const trailers: Record<string, string> = {};
    for (const [name, value] of Object.entries(this.trailers ?? {})) {
      if (value === undefined || name.startsWith(':')) continue;
      trailers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    this.res.addTrailers(trailers);
    if (!this.h2.destroyed && !this.h2.writableEnded) this.h2.end();
    this.exchange.completed(this.ctx.connections);
  }

  /** The service's stream closed: a reset before the end goes on to the client. */
  private readonly onUpstreamClose = (): void => {
    if (this.finished) return;
    const code = this.upstream!.rstCode ?? NGHTTP2_INTERNAL_ERROR;
    if (!this.exchange.answered) {
      this.fail(INGRESS_ERRORS.tunnelUnreachable, `the service reset the stream (code ${code})`);
      return;
    }
    this.reset(code === NGHTTP2_NO_ERROR ? NGHTTP2_INTERNAL_ERROR : code);
  };

  /** The client's stream closed: a call it cancelled is cancelled at the service too. */
  private readonly onClientClose = (): void => {
    this.transforms?.destroy();
    const upstream = this.upstream;
    if (upstream && !upstream.closed) upstream.close(this.h2.rstCode || NGHTTP2_CANCEL);
    if (this.finished) return;
    this.finished = true;
    // 499: the client went away before the answer (nginx's convention).
    const status = this.response?.status ?? 499;
    this.exchange.count(status);
    this.exchange.done?.(status, this.response?.raw ?? []);
  };

  /** The call breaks after its answer began: the client's stream is reset with `code`. */
  private reset(code: number): void {
    if (this.finished) return;
    this.finished = true;
    const status = this.response?.status ?? 502;
    this.exchange.count(status);
    this.exchange.done?.(status, this.response?.raw ?? []);
    this.upstream?.close(NGHTTP2_CANCEL);
    if (!this.h2.destroyed) this.h2.close(code);
  }

  /** The edge's page for `error` instead of the service's answer (a gRPC status to gRPC). */
  private fail(error: IngressError, detail: string): void {
    if (this.exchange.answered) {
      this.reset(NGHTTP2_INTERNAL_ERROR);
      return;
    }
    const { head } = this.exchange;
    const host = routingHost(head.host) ?? '';
    this.answerInstead(error.status, () => respondPageH2(this.h2, error, host, head, detail));
  }

  private respond(answer: {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: string;
  }): string[] {
    return respondH2(this.h2, answer, this.exchange.head);
  }

  /** Answer with what `write` writes (its headers) instead of the service, which is cancelled. */
  private answerInstead(status: number, write: () => string[]): void {
    if (this.finished) return;
    this.finished = true;
    const upstream = this.upstream;
    if (upstream && !upstream.closed) upstream.close(NGHTTP2_CANCEL);
    const { exchange } = this;
    exchange.answered = true;
    const raw = this.h2.destroyed || this.h2.headersSent ? [] : write();
    exchange.count(status, (performance.now() - exchange.started) / 1000);
    exchange.done?.(status, raw);
  }
}
