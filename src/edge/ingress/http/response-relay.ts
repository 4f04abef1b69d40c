/**
 * The response side of a lean relay connection: the agent's response head is read strictly from
 * the tunnel stream, passed on to the client with the head the client gets, and its body relayed
 * as bytes by its framing; then the exchange is counted and the connection goes on to the next
 * request or closes. A stream that fails before the answer is retried once (a request without a
 * body on a reused stream) or answered 502; one that fails after it breaks the response.
 *
 * The second layer of HttpConnection (http-connection.ts), over the stream it holds
 * (connection-stream.ts); the request side is the connection itself.
 */
import type { Duplex } from 'node:stream';
import { failureDetail, INGRESS_ERRORS, rawAnswer, rawErrorResponse } from '../error-pages.js';
import type { RespondDecision } from '../../../policy/index.js';
import { ChunkedFramer, LengthFramer } from './body-framing.js';
import {
  captured,
  clientResponseHead,
  CloseFramer,
  responseFramer,
  type Exchange,
} from './exchange.js';
import { ConnectionStream, Phase } from './connection-stream.js';
import { routingHost } from './http-forwarding.js';
import {
  awaitResponsePhase,
  leanResponseHeaders,
  type ResponseAfterPhase,
} from './lean-response-phase.js';
import { POLICY_FAILED, rawPolicyFailure } from './http-policy-writes.js';
import type { ResponseHead } from './response-head.js';
import { BodyTransforms } from './body-transforms.js';
import type { Transform } from 'node:stream';

export abstract class ResponseRelay extends ConnectionStream {
  /** Read the next request head from what is buffered. */
  protected abstract readHead(): void;
  /**
   * The agent took the upgrade of `exchange` (`response` is its 101, `rest` what followed it):
   * the connection leaves HTTP for a raw relay.
   */
  protected abstract switchProtocols(
    exchange: Exchange,
    response: ResponseHead,
    rest: Buffer | undefined,
  ): void;

  protected readonly onStreamData = (chunk: Buffer): void => {
    const exchange = this.exchange;
    if (!exchange) {
      // Bytes with no request to answer: the stream is out of step; it cannot be used again.
      this.dropStream();
      return;
    }
    if (exchange.responseBody) this.relayResponseBody(exchange, chunk);
    else this.readResponseHead(exchange, chunk);
  };

  private readResponseHead(exchange: Exchange, chunk: Buffer): void {
    const read = exchange.takeResponseHead(chunk);
    if (read === undefined) return;
    if (typeof read === 'string') {
      this.badGateway(exchange, read);
      return;
    }
    const { response, rest } = read;
    if (response.status < 200) {
      if (response.status === 101) {
        if (!exchange.head.upgrade) {
          this.badGateway(exchange, 'a protocol switch the request did not ask for');
        } else if (!response.upgrade) {
          // Nothing says what the bytes after it are.
          this.badGateway(exchange, 'a 101 without Connection: Upgrade');
        } else {
          this.switchProtocols(exchange, response, rest);
        }
        return;
      }
      // 100 Continue, 103 Early Hints: passed on, then the final response follows; never to an
      // HTTP/1.0 client (RFC 9110 §15.2).
      if (exchange.head.minor === 1) {
        exchange.answered = true;
        this.socket.write(clientResponseHead(response, false, false), 'latin1');
      }
      if (rest) this.readResponseHead(exchange, rest);
      return;
    }
    if (response.framing.kind === 'chunked' && exchange.head.minor === 0) {
      // RFC 9112 §6.1: never to an HTTP/1.0 request, which cannot read it.
      this.badGateway(exchange, 'a chunked response to an HTTP/1.0 request');
      return;
    }
    exchange.upstreamAt = performance.now();
    const phase = exchange.policy?.response;
    if (!phase) {
      this.writeResponseHead(exchange, response, rest, undefined);
      return;
    }
    // on_http_response, on the head (http-policy-lean.ts): its header changes, its answer, or it
    // fails closed.
    const after = leanResponseHeaders(phase, response.status, response.raw);
    if (!(after instanceof Promise)) {
      this.afterResponsePhase(exchange, response, rest, after);
      return;
    }
    const stream = this.stream!;
    awaitResponsePhase(
      after,
      stream,
      (settled) => this.afterResponsePhase(exchange, response, rest, settled),
      { over: () => this.exchange !== exchange, holds: () => this.stream === stream },
    );
  }

  private afterResponsePhase(
    exchange: Exchange,
    response: ResponseHead,
    rest: Buffer | undefined,
    after: ResponseAfterPhase,
  ): void {
    if (!after || 'problem' in after) {
      const error = INGRESS_ERRORS.unsafeResponseHead;
      const host = routingHost(exchange.head.host) ?? '';
      this.answerInstead(
        exchange,
        after ? error.status : POLICY_FAILED.status,
        after ? rawErrorResponse(error, host, after.problem) : rawPolicyFailure(),
      );
      return;
    }
    if ('answer' in after) {
      this.answerWithPolicy(exchange, after.answer);
      return;
    }
    response.raw = after.headers;
    this.writeResponseHead(exchange, response, rest, after.transforms);
  }

  /** Write the response head to the client, and relay the body that came with it. */
  private writeResponseHead(
    exchange: Exchange,
    response: ResponseHead,
    rest: Buffer | undefined,
    transforms: readonly Transform[] | undefined,
  ): void {
    exchange.response = response;
    const capture = exchange.bodies?.response;
    // The inspector's copy of a chunked body is taken decoded, by the framer.
    exchange.responseBody = responseFramer(response.framing, capture && captured(capture));
    exchange.answered = true;
    exchange.closing = this.closesAfter(exchange);
    if (transforms?.length) this.transform(exchange, response, transforms);
    const socket = this.socket;
    const http10 = exchange.head.minor === 0;
    const head = clientResponseHead(response, exchange.closing, http10);
    const framer = exchange.responseBody;
    const restLength = rest === undefined ? 0 : rest.length;
    if (
      framer instanceof LengthFramer &&
      restLength >= framer.left &&
      restLength <= WHOLE_IN_ONE_WRITE &&
      !capture &&
      !exchange.transforms
    ) {
      this.writeWholeResponse(exchange, framer, head, rest);
      return;
    }
    // The head and what follows it in this turn go out in one write (one syscall, one TLS
    // record): agents that send a response's head and body as two frames (@ngrok/ngrok does) are
    // read in one turn.
    socket.cork();
    socket.write(head, 'latin1');
    exchange.answeredAt = performance.now();
    if (rest) this.relayResponseBody(exchange, rest);
    else if (exchange.responseBody.done) this.responseDone(exchange);
    if (exchange.responseBody.done && !exchange.transforms) socket.uncork();
    else process.nextTick(uncork, socket);
  }

  /**
   * A response whole in the chunk that brought its head (Burrow's SDK sends head and body in one
   * frame, and so does @ngrok/ngrok when the service writes them together), framed by length,
   * neither captured nor transformed: head and body go to the client in one write. Corking the
   * socket for a string and a buffer instead cost a writev through Node's generic path, with its
   * chunk list and its string encoding in C++, on every keep-alive request (issue 29). They go as
   * one latin1 string (the body's bytes read as latin1 come back the same): Node encodes a string
   * of this size on its stack and writes it in one call, where a buffer built for them cost an
   * allocation, two copies and a call more (bench/support/relay-micro.ts, "response write").
   */
  private writeWholeResponse(
    exchange: Exchange,
    framer: LengthFramer,
    head: string,
    rest: Buffer | undefined,
  ): void {
    const n = rest === undefined ? 0 : framer.take(rest, 0);
    // Every character of the head is latin1 (parsed from bytes as latin1, or ASCII of ours).
    const text = n > 0 ? head + rest!.toString('latin1', 0, n) : head;
    const socket = this.socket;
    if (!socket.write(text, 'latin1') && n > 0) this.waitForDrain();
    exchange.answeredAt = performance.now();
    if (rest !== undefined && n < rest.length) exchange.spoiled = true;
    this.responseDone(exchange);
  }

  /**
   * The policy changes the body (find-replace, compress-response): it goes through `transforms`
   * (body-transforms.ts), chunked to an HTTP/1.1 client, until the connection closes to an
   * HTTP/1.0 one.
   */
  private transform(
    exchange: Exchange,
    response: ResponseHead,
    transforms: readonly Transform[],
  ): void {
    const chunked = exchange.head.minor === 1;
    if (!chunked) exchange.closing = true;
    else if (response.framing.kind !== 'chunked') response.raw.push('Transfer-Encoding', 'chunked');
    const body = new BodyTransforms(transforms, this.socket, chunked, this.stream!, () =>
      this.socket.destroy(),
    );
    exchange.transforms = body;
    if (response.framing.kind === 'chunked') {
      const capture = exchange.bodies?.response;
      exchange.responseBody = responseFramer(response.framing, (bytes) => {
        capture?.add(bytes);
        body.write(bytes);
      });
    }
  }

  private relayResponseBody(exchange: Exchange, chunk: Buffer): void {
    const framer = exchange.responseBody!;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      // The client already has part of this response: it must see it broken, not short.
      this.socket.destroy();
      return;
    }
    const capture = exchange.bodies?.response;
    if (capture && n > 0 && !(framer instanceof ChunkedFramer)) {
      capture.add(n === chunk.length ? chunk : chunk.subarray(0, n));
    }
    const transforms = exchange.transforms;
    if (n > 0 && !transforms) {
      const written = this.socket.write(n === chunk.length ? chunk : chunk.subarray(0, n));
      // In a corked turn, judged at its end (ConnectionStream).
      if (!written && !this.corkedInTurn) this.waitForDrain();
    } else if (n > 0 && !(framer instanceof ChunkedFramer)) {
      // A chunked body reaches the transforms decoded, through the framer's parts.
      transforms!.write(n === chunk.length ? chunk : chunk.subarray(0, n));
    }
    if (n < chunk.length) exchange.spoiled = true;
    if (framer.done) this.responseDone(exchange);
  }

  private responseDone(exchange: Exchange): void {
    const transforms = exchange.transforms;
    if (transforms && !exchange.flushed) {
      // The transforms' last bytes go out first.
      transforms.end(() => {
        exchange.flushed = true;
        if (this.exchange === exchange) this.responseDone(exchange);
      });
      return;
    }
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

  /** The exchange is over, both ways: count it, then read the next request or close. */
  protected finish(exchange: Exchange): void {
    const response = exchange.response!;
    exchange.completed(this.ctx.connections);
    this.exchange = undefined;
    const close = exchange.closing || this.clientEnded || this.ctx.draining;
    // A service that was asked to switch protocols and did not: its connection is not reused.
    if (exchange.spoiled || response.close || this.streamRetired || exchange.head.upgrade) {
      this.dropStream();
    }
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

  protected readonly onStreamError = (err: NodeJS.ErrnoException): void => {
    this.streamError = failureDetail(err);
  };

  protected readonly onStreamEnd = (): void => {
    const exchange = this.exchange;
    if (exchange?.responseBody instanceof CloseFramer) {
      exchange.responseBody.end();
      this.dropStream();
      this.responseDone(exchange);
      return;
    }
    this.streamGone();
  };

  protected readonly onStreamClose = (): void => {
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

  protected badGateway(exchange: Exchange, detail: string): void {
    const error = INGRESS_ERRORS.tunnelUnreachable;
    this.answerInstead(
      exchange,
      error.status,
      rawErrorResponse(error, routingHost(exchange.head.host) ?? '', detail),
    );
  }

  /**
   * on_http_response replaced the agent's answer (custom-response): write the policy's instead,
   * and close, since the agent's body was not read (the stream goes too).
   */
  private answerWithPolicy(exchange: Exchange, answer: RespondDecision): void {
    this.dropStream();
    exchange.answered = true;
    const { head } = exchange;
    const bytes = rawAnswer(answer, {
      close: true,
      accept: head.accept,
      method: head.method,
      http10: head.minor === 0,
    });
    exchange.count(answer.status);
    // The inspector keeps the answer the client got in place of the service's.
    exchange.bodies?.response.add(Buffer.from(bytes.body));
    exchange.done?.(answer.status, bytes.raw);
    this.exchange = undefined;
    this.phase = Phase.Closed;
    this.socket.write(bytes.head, 'latin1');
    this.socket.end(bytes.body);
  }

  /** Answer with the edge's own `response` (`status`) instead of the agent's, and close. */
  private answerInstead(exchange: Exchange, status: number, response: string): void {
    this.dropStream();
    if (exchange.answered) {
      this.socket.destroy();
      return;
    }
    exchange.answered = true;
    exchange.count(status);
    exchange.done?.(status, []);
    this.exchange = undefined;
    this.phase = Phase.Closed;
    this.socket.end(response);
  }
}

/** The most of a response body copied next to its head into one write. */
const WHOLE_IN_ONE_WRITE = 16 * 1024;

function uncork(socket: Duplex): void {
  socket.uncork();
}

/** Trailers of a body the transforms re-frame are not passed on. */
