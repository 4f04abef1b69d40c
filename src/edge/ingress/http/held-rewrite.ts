/**
 * A request body that request-body-find-replace rewrites, held whole before it goes on: an
 * HTTP/1.0 request has no chunked coding, so the rewritten body can only go with a
 * Content-Length, known once the rewrite is done. It is held within the limits of a body a policy
 * reads whole (http-policy-body.ts: 10 MiB, and the process's budget).
 */
import { PolicyBodyBuffer } from './http-policy-body.js';
import type { BodySink } from './body-transforms.js';

/**
 * The rewrite's output (a {@link BodySink} for BodyTransforms, never full), sent with `send` once
 * complete; `refuse` is told instead, once, when it grows over the limits.
 * @example const held = new HeldRewrite((body) => stream.write(headWith(body.length) + body), refuse);
 */
export class HeldRewrite implements BodySink {
  private readonly buffer = new PolicyBodyBuffer();
  /** Sent or refused: nothing more is taken. */
  private settled = false;

  constructor(
    private readonly send: (body: Buffer) => void,
    private readonly refuse: (reason: string) => void,
  ) {}

  write(bytes: Buffer | string): boolean {
    if (this.settled) return true;
    const problem = this.buffer.add(typeof bytes === 'string' ? Buffer.from(bytes) : bytes);
    if (problem) {
      this.settled = true;
      this.buffer.release();
      this.refuse(problem);
    }
    return true;
  }

  /** Held bytes never fill a socket: no 'drain' is ever owed. */
  once(): this {
    return this;
  }

  /** The exchange ended before the rewrite did: nothing is sent, the bytes leave the budget. */
  discard(): void {
    if (this.settled) return;
    this.settled = true;
    this.buffer.release();
  }

  /** The rewrite is complete: send the body, and give its bytes back to the budget. */
  flush(): void {
    if (this.settled) return;
    this.settled = true;
    this.send(this.buffer.bytes);
    this.buffer.release();
  }
}
