import { BurrowError, muxCode, type ErrorCode as CodeString } from '../../core/errors.js';
import { errorCodeName } from './frame.js';

/**
 * A muxado error: a stream reset, a GOAWAY, or the session closing. A BurrowError like every
 * other: `code` is its string code (`ERR_BURROW_MUX_STREAM_REFUSED`, …, one per muxado error
 * number; docs/errors.md), the one logs, error pages and SDK errors show. `wireCode` is the
 * number (ErrorCode in ./frame.ts) that RST and GOAWAY frames carry on the wire; `remote` says
 * whether the peer reported it (RST/GOAWAY received) or we did. Its HTTP status is 502: where one
 * reaches a client, the tunnel behind the edge failed.
 *
 * @example
 * stream.on('error', (err) => {
 *   if (err instanceof MuxError && err.wireCode === ErrorCode.StreamRefused) retryLater();
 *   log.warn({ code: err.code }, err.message); // code: 'ERR_BURROW_MUX_STREAM_REFUSED'
 * });
 */
export class MuxError extends BurrowError {
  declare readonly code: CodeString;
  /** The muxado error number, as sent or received in RST and GOAWAY frames. */
  readonly wireCode: number;
  /** True when the peer reported the error (RST or GOAWAY received). */
  readonly remote: boolean;

  constructor(wireCode: number, message: string, remote = false, options?: { cause?: unknown }) {
    super(muxCode(wireCode), 502, `${message} (${errorCodeName(wireCode)})`, {}, options);
    this.wireCode = wireCode;
    this.remote = remote;
  }
}
