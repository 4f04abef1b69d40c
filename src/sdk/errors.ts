import { BurrowError, NO_HTTP_STATUS } from '../core/errors.js';
import { RpcError } from '../protocol/index.js';

/**
 * An error the Burrow server reported, or a failure of the agent session itself.
 *
 * `code` is the server's `ERR_NGROK_nnn` or `ERR_BURROW_*` code when it sent one (authentication
 * and bind refusals always do), so programs can react to the reason rather than parse the
 * message; `message` is the server's explanation, which says what was refused and how to fix it.
 * A failure of the session itself keeps the error it wraps as `cause` (a MuxError there has its
 * own `code`, e.g. `ERR_BURROW_MUX_REMOTE_GONE_AWAY`). Part of Burrow's error family
 * (BurrowError); docs/errors.md lists the codes.
 *
 * @example
 * try {
 *   await connect({ serverAddr: '127.0.0.1:4443', authtoken: 'bad' });
 * } catch (err) {
 *   if (err instanceof BurrowAgentError && err.code === 'ERR_NGROK_105') console.error('fix your token');
 * }
 */
export class BurrowAgentError extends BurrowError {
  /** `ERR_NGROK_nnn` or `ERR_BURROW_*`, when the server gave one. */
  declare readonly code: string | undefined;

  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    super(code, NO_HTTP_STATUS, message, {}, options);
  }

  /** Same as `code`, under the name @ngrok/ngrok uses, so code written for it keeps working. */
  get errorCode(): string | undefined {
    return this.code;
  }
}

/**
 * The SDK's error for anything a session operation failed with: refusals from the server keep
 * their code and message; other failures (network, TLS, timeouts, the session's muxado layer) are
 * wrapped with `what` as context, the original as `cause`, and its code when it is a BurrowError
 * (a MuxError's `ERR_BURROW_MUX_*`).
 * @example throw toAgentError(err, 'failed to bind the endpoint');
 */
export function toAgentError(err: unknown, what: string): BurrowAgentError {
  if (err instanceof BurrowAgentError) return err;
  if (err instanceof RpcError)
    return new BurrowAgentError(err.message, err.errorCode, { cause: err });
  const reason = err instanceof Error ? err.message : String(err);
  const code = err instanceof BurrowError ? err.code : undefined;
  return new BurrowAgentError(`${what}: ${reason}`, code, { cause: err });
}
