/**
 * Request bodies a policy action reads whole (verify-webhook's signature check), with the limits
 * that keep slow or huge senders from holding memory: per body, per wait, and for the process.
 */
import type { Readable } from 'node:stream';

/** The most a policy action (verify-webhook) may read of a request body into memory. */
export const POLICY_BODY_LIMIT = 10 * 1024 * 1024;

/** A request body read whole for a policy action, kept to be sent upstream instead of the stream. */
export interface BodyHolder {
  body: Buffer | undefined;
}

/** How long a client may take to send a body a policy action reads whole. */
export const POLICY_BODY_TIMEOUT_MS = 30_000;
/** Bytes of such bodies held at once by the whole process: slow senders cannot pile up memory. */
export const POLICY_BODY_BUDGET = 256 * 1024 * 1024;
let bufferedPolicyBytes = 0;

/** Bytes of request bodies held for policies right now, across the process (for tests). */
export function policyBodyBytesHeld(): number {
  return bufferedPolicyBytes;
}

const EMPTY = Buffer.alloc(0);

/**
 * A body read whole for a policy, on either path: its bytes copied into one buffer grown by
 * doubling (sized by what came, never by what Content-Length promises), so that a body of many
 * tiny pieces keeps no object per piece, within {@link POLICY_BODY_LIMIT} and the process's
 * {@link POLICY_BODY_BUDGET}, which it holds until {@link release}.
 * @example const problem = body.add(chunk); if (problem) refuse(problem);
 */
export class PolicyBodyBuffer {
  private acc = EMPTY;
  private size = 0;

  /** Append `bytes`; the reason when it cannot (over the limit or the budget), nothing kept. */
  add(bytes: Buffer): string | undefined {
    const size = this.size + bytes.length;
    if (size > POLICY_BODY_LIMIT) return `the body is over ${POLICY_BODY_LIMIT} bytes`;
    if (bufferedPolicyBytes + bytes.length > POLICY_BODY_BUDGET) {
      return 'the server holds too many request bodies right now; retry later';
    }
    bufferedPolicyBytes += bytes.length;
    if (size > this.acc.length) {
      const grown = Buffer.allocUnsafe(
        Math.min(POLICY_BODY_LIMIT, Math.max(size, this.acc.length * 2, 16 * 1024)),
      );
      this.acc.copy(grown, 0, 0, this.size);
      this.acc = grown;
    }
    bytes.copy(this.acc, this.size);
    this.size = size;
    return undefined;
  }

  /** The body so far. */
  get bytes(): Buffer {
    return this.acc.subarray(0, this.size);
  }

  /** Give its bytes back to the process's budget (the read is over); call once. */
  release(): void {
    bufferedPolicyBytes -= this.size;
  }
}

/**
 * Reads `req`'s body (an HTTP/2 request's stream) once, on
 * first call. It rejects (and the request is failed) when the body is
 * over {@link POLICY_BODY_LIMIT}, takes longer than {@link POLICY_BODY_TIMEOUT_MS}, or would take
 * the process past {@link POLICY_BODY_BUDGET}.
 * @example const body = await bodyReader(req, holder)();
 */
export function bodyReader(
  req: Readable,
  holder: BodyHolder,
  timeoutMs = POLICY_BODY_TIMEOUT_MS,
): () => Promise<Buffer> {
  let pending: Promise<Buffer> | undefined;
  return () =>
    (pending ??= new Promise<Buffer>((resolve, reject) => {
      const body = new PolicyBodyBuffer();
      let settled = false;
      const settle = (err: Error | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.off('data', onData);
        body.release();
        if (!err) {
          holder.body = body.bytes;
          resolve(holder.body);
          return;
        }
        reject(err);
        // What is left of the body will not be read: the connection cannot be reused.
        req.pause();
      };
      const timer = setTimeout(() => {
        settle(new Error(`the body took longer than ${timeoutMs / 1000} s`));
        // A client that stalls mid-body gets its connection closed, not held.
        setImmediate(() => req.destroy());
      }, timeoutMs);
      timer.unref();
      const onData = (chunk: Buffer): void => {
        const problem = body.add(chunk);
        if (problem) settle(new Error(problem));
      };
      req.on('data', onData);
      req.once('end', () => settle(undefined));
      req.once('error', (err: Error) => settle(err));
    }));
}
