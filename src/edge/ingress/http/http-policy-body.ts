/**
 * Request bodies a policy action reads whole (verify-webhook's signature check), with the limits
 * that keep slow or huge senders from holding memory: per body, per wait, and for the process.
 */
import type { IncomingMessage } from 'node:http';

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

/**
 * Count `n` more bytes of bodies read for policies against {@link POLICY_BODY_BUDGET}; false (and
 * nothing counted) when the process would go over it.
 * @example if (!holdPolicyBytes(chunk.length)) refuse();
 */
export function holdPolicyBytes(n: number): boolean {
  if (bufferedPolicyBytes + n > POLICY_BODY_BUDGET) return false;
  bufferedPolicyBytes += n;
  return true;
}

/** Give back `n` bytes counted by {@link holdPolicyBytes}. */
export function releasePolicyBytes(n: number): void {
  bufferedPolicyBytes -= n;
}

/**
 * Reads `req`'s body once, on first call. It rejects (and the request is failed) when the body is
 * over {@link POLICY_BODY_LIMIT}, takes longer than {@link POLICY_BODY_TIMEOUT_MS}, or would take
 * the process past {@link POLICY_BODY_BUDGET}.
 * @example const body = await bodyReader(req, holder)();
 */
export function bodyReader(
  req: IncomingMessage,
  holder: BodyHolder,
  timeoutMs = POLICY_BODY_TIMEOUT_MS,
): () => Promise<Buffer> {
  let pending: Promise<Buffer> | undefined;
  return () =>
    (pending ??= new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let held = 0;
      let settled = false;
      const settle = (err: Error | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.off('data', onData);
        releasePolicyBytes(held);
        if (!err) {
          holder.body = Buffer.concat(chunks);
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
        size += chunk.length;
        if (size > POLICY_BODY_LIMIT) {
          settle(new Error(`the body is over ${POLICY_BODY_LIMIT} bytes`));
        } else if (!holdPolicyBytes(chunk.length)) {
          settle(new Error('the server holds too many request bodies right now; retry later'));
        } else {
          held += chunk.length;
          chunks.push(chunk);
        }
      };
      req.on('data', onData);
      req.once('end', () => settle(undefined));
      req.once('error', (err: Error) => settle(err));
    }));
}
