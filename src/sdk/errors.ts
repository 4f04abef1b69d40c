import { RpcError } from '../protocol/index.js';

/**
 * An error the Burrow server reported, or a failure of the agent session itself.
 *
 * `code` is the server's `ERR_NGROK_nnn` code when it sent one (authentication and bind
 * refusals always do), so programs can react to the reason rather than parse the message;
 * `message` is the server's explanation, which says what was refused and how to fix it.
 *
 * @example
 * try {
 *   await connect({ serverAddr: '127.0.0.1:4443', authtoken: 'bad' });
 * } catch (err) {
 *   if (err instanceof BurrowAgentError && err.code === 'ERR_NGROK_105') console.error('fix your token');
 * }
 */
export class BurrowAgentError extends Error {
  /** `ERR_NGROK_nnn`, when the server gave one. */
  readonly code: string | undefined;

  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BurrowAgentError';
    this.code = code;
  }

  /** Same as `code`, under the name @ngrok/ngrok uses, so code written for it keeps working. */
  get errorCode(): string | undefined {
    return this.code;
  }
}

/**
 * The SDK's error for anything a session operation failed with: refusals from the server keep
 * their code and message; other failures (network, TLS, timeouts) are wrapped with `what` as
 * context and the original as `cause`.
 * @example throw toAgentError(err, 'failed to bind the endpoint');
 */
export function toAgentError(err: unknown, what: string): BurrowAgentError {
  if (err instanceof BurrowAgentError) return err;
  if (err instanceof RpcError)
    return new BurrowAgentError(err.message, err.errorCode, { cause: err });
  const reason = err instanceof Error ? err.message : String(err);
  return new BurrowAgentError(`${what}: ${reason}`, undefined, { cause: err });
}
