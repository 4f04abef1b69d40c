import { errorCodeName } from './frame.js';

/**
 * A muxado error: a stream reset, a GOAWAY, or the session closing. `code` is the wire error code
 * (ErrorCode); `remote` says whether the peer reported it (RST/GOAWAY received) or we did.
 *
 * @example
 * stream.on('error', (err) => {
 *   if (err instanceof MuxError && err.code === ErrorCode.StreamRefused) retryLater();
 * });
 */
export class MuxError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly remote = false,
  ) {
    super(`${message} (${errorCodeName(code)})`);
    this.name = 'MuxError';
  }
}
