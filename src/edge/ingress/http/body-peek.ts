/**
 * A request body that a policy reads whole before it decides (verify-webhook, a jwt-validation
 * body token, `req.trailers`, `req.ts.body_received`), on the lean relay. Its bytes are parsed as
 * they come and decoded for the policy, while the bytes as sent stay the connection's: once the
 * policy lets the request by they are relayed as they came, by the same framer as any body, so
 * the agent gets exactly what the edge judged. The limits are http-policy-body.ts's: per body, per
 * wait, and bytes held by the whole process.
 */
import type { HeaderInput } from '../../../policy/index.js';
import { ChunkedFramer, LengthFramer, type BodyFramer } from './body-framing.js';
import {
  bodyReader,
  PolicyBodyBuffer,
  POLICY_BODY_TIMEOUT_MS,
  type BodyHolder,
} from './http-policy-body.js';
import type { Readable } from 'node:stream';
import type { RequestHead } from './request-head.js';

/**
 * What a policy gets of a request's body on the relay: the body read whole (decoded from its
 * framing), and the trailers that followed it, once read.
 */
export interface PolicyBodySource {
  /** Called unbound, as the policy's `req.body`. */
  readonly read: () => Promise<Buffer>;
  readonly trailers: () => HeaderInput;
}

const EMPTY = Buffer.alloc(0);
const NO_TRAILERS: HeaderInput = Object.freeze({});

/** The source of a request without a body: nothing to wait for. */
export const NO_BODY: PolicyBodySource = {
  read: () => Promise.resolve(EMPTY),
  trailers: () => NO_TRAILERS,
};

/**
 * The body of an HTTP/2 request, for a policy that reads it before deciding: read whole on the
 * first call, with the limits of http-policy-body.ts, into `held`, whose bytes then go on to the
 * agent in place of the stream they were read from (h2-exchange.ts, h2-call.ts). HTTP/2 frames its
 * data itself: there is no coding to keep, and the trailers are the stream's.
 * @example const held = { body: undefined }; leanRoute(head, host, socket, streamBodySource(req, held));
 */
export function streamBodySource(
  req: Readable & { readonly trailers: HeaderInput },
  held: BodyHolder,
): PolicyBodySource {
  return { read: bodyReader(req, held), trailers: () => req.trailers };
}

/**
 * One request body being read for its policy. The connection feeds it every chunk that comes
 * while the policy decides ({@link feed}); the chunks stay in {@link raw}, to be relayed or handed
 * over after the head's bytes.
 * @example
 * const peek = new BodyPeek(head, () => socket.destroy());
 * peek.parse(alreadyRead); socket.on('data', (c) => peek.feed(c)); await peek.body;
 */
export class BodyPeek {
  /** The chunks received since the read began, as sent, in order. */
  readonly raw: Buffer[] = [];
  /** The body without its framing: what the policy reads. */
  readonly body: Promise<Buffer>;
  private rawBytes = 0;
  /** {@link rawBytes} when the body ended: what came after it is the next request's. */
  private bodyEnd = 0;
  /** The decoded body, copied in as it comes (http-policy-body.ts). */
  private readonly decoded = new PolicyBodyBuffer();
  private readonly trailerLines: string[] = [];
  private readonly framer: BodyFramer;
  private settled = false;
  private failed = false;
  private resolve!: (body: Buffer) => void;
  private reject!: (err: Error) => void;
  private readonly timer: NodeJS.Timeout;

  constructor(
    head: RequestHead,
    /** Called when the client took too long: its connection is not to be held. */
    private readonly onTimeout: () => void,
    timeoutMs = POLICY_BODY_TIMEOUT_MS,
  ) {
    this.framer = head.chunked
      ? new ChunkedFramer({
          data: (bytes) => this.part(bytes),
          trailer: (line) => this.trailerLines.push(line),
        })
      : new LengthFramer(head.contentLength ?? 0);
    this.body = new Promise<Buffer>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // A rejection nobody asked about yet (the policy reads the body later) is not unhandled.
    this.body.catch(() => undefined);
    this.timer = setTimeout(() => {
      this.fail(new Error(`the body took longer than ${timeoutMs / 1000} s`));
      this.onTimeout();
    }, timeoutMs);
    this.timer.unref();
    if (this.framer.done) this.settle();
  }

  /** Bytes of the body that were read before the read began (they stay where they are). */
  parse(bytes: Buffer): void {
    if (this.settled || bytes.length === 0) return;
    const n = this.framer.take(bytes, 0);
    if (typeof n === 'string') {
      this.fail(new Error(`the body is malformed: ${n}`));
      return;
    }
    if (this.framer instanceof LengthFramer && n > 0) this.part(bytes.subarray(0, n));
    if (this.framer.done) this.settle();
  }

  /** A chunk that came while the policy decides: kept as sent, and parsed. */
  feed(chunk: Buffer): void {
    this.raw.push(chunk);
    this.rawBytes += chunk.length;
    this.parse(chunk);
  }

  /**
   * True when reading the client should pause: the body failed (over the limit), or it is read
   * and more than `after` bytes of the next requests came after it.
   */
  overfull(after: number): boolean {
    return this.failed || (this.settled && this.rawBytes - this.bodyEnd > after);
  }

  /** The trailers that followed a chunked body, by lower-case name, as Node's `req.trailers`. */
  trailers(): HeaderInput {
    if (this.trailerLines.length === 0) return NO_TRAILERS;
    const out: Record<string, string> = {};
    for (const line of this.trailerLines) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      out[name] = name in out ? `${out[name]}, ${value}` : value;
    }
    return out;
  }

  /** The read stops: the client left, or its connection is served otherwise. */
  fail(err: Error): void {
    if (this.settled) return;
    this.failed = true;
    this.finish();
    this.reject(err);
  }

  private part(bytes: Buffer): void {
    if (this.settled) return;
    const problem = this.decoded.add(bytes);
    if (problem) this.fail(new Error(problem));
  }

  private settle(): void {
    if (this.settled) return;
    this.bodyEnd = this.rawBytes;
    this.finish();
    this.resolve(this.decoded.bytes);
  }

  private finish(): void {
    this.settled = true;
    clearTimeout(this.timer);
    // Held only while read: the bytes that count against the budget are those of reads under way.
    this.decoded.release();
  }
}
