/**
 * The body of an HTTP/2 request on its way to the agent, after the HTTP/1.1 head h2-exchange.ts
 * wrote on the tunnel stream: as it came when its Content-Length says how long it is (never more,
 * never less), chunked when nothing does, through request-body-find-replace's rewrite (chunked)
 * when the policy asked for one, and whole, in one piece, when the policy read it before it
 * decided (body-peek.ts).
 */
import type { Http2ServerRequest } from 'node:http2';
import type { Duplex } from 'node:stream';
import { LengthFramer } from './body-framing.js';
import { BodyTransforms, rewriter } from './body-transforms.js';
import type { Exchange } from './exchange.js';

/**
 * One request's body, sent by {@link H2RequestBody.send} once the head is on `stream`.
 * @example const body = new H2RequestBody(req, exchange, (detail) => fail(detail)); body.send(stream);
 */
export class H2RequestBody {
  /** Whether all of it reached the stream (its rewrite's last bytes too). */
  sent = false;
  private framer: LengthFramer | undefined;
  /** request-body-find-replace's rewrite, while the body streams through it. */
  private transforms: BodyTransforms | undefined;
  /** The tunnel stream, until the exchange gives it up ({@link detach}). */
  private stream: Duplex | undefined;

  constructor(
    private readonly req: Http2ServerRequest,
    private readonly exchange: Exchange,
    /** The body cannot go as it is: the exchange fails with `detail`. */
    private readonly fail: (detail: string) => void,
  ) {}

  send(stream: Duplex): void {
    const { exchange, req } = this;
    this.stream = stream;
    const length = exchange.head.contentLength;
    if (length) this.framer = new LengthFramer(length);
    const rewrite = exchange.policy?.bodyRewrite;
    if (rewrite) {
      // Chunked: agentRequestHead said so.
      this.transforms = new BodyTransforms([rewriter(rewrite)], stream, true, req, () =>
        this.fail('the request body rewrite failed'),
      );
    }
    const held = exchange.heldBody;
    if (held) {
      // Read whole for the policy: it goes as one piece, the stream it came on spent.
      if (held.length > 0) this.onData(held);
      this.onEnd();
      return;
    }
    req.on('data', this.onData);
    req.once('end', this.onEnd);
  }

  /** The exchange gave the tunnel stream up (answered, failed, or its client gone). */
  detach(): void {
    this.stream?.off('drain', this.resume);
    this.stream = undefined;
  }

  /** The exchange broke off: the rewrite, if any, stops too. */
  destroy(): void {
    this.detach();
    this.transforms?.destroy();
  }

  private readonly onData = (chunk: Buffer): void => {
    const stream = this.stream;
    if (!stream) return;
    const framer = this.framer;
    // nghttp2 checks DATA against content-length too; the agent must never get more.
    if (framer && framer.take(chunk, 0) !== chunk.length) {
      this.fail('a request body longer than its Content-Length');
      return;
    }
    this.exchange.bodies?.request.add(chunk);
    if (this.transforms) {
      this.transforms.write(chunk);
      return;
    }
    if (framer) {
      stream.write(chunk);
    } else {
      stream.write(`${chunk.length.toString(16)}\r\n`, 'latin1');
      stream.write(chunk);
      stream.write('\r\n', 'latin1');
    }
    if (stream.writableNeedDrain) {
      this.req.pause();
      stream.once('drain', this.resume);
    }
  };

  private readonly resume = (): void => {
    if (this.stream) this.req.resume();
  };

  private readonly onEnd = (): void => {
    const stream = this.stream;
    if (!stream) return;
    if (this.framer && !this.framer.done) {
      this.fail('a request body shorter than its Content-Length');
      return;
    }
    const transforms = this.transforms;
    if (transforms) {
      transforms.end(() => {
        this.transforms = undefined;
        this.sent = true;
      });
      return;
    }
    if (!this.framer) stream.write('0\r\n\r\n', 'latin1');
    this.sent = true;
  };
}
