/**
 * Giving up a tunnel stream whose public client left (FIN, RST, a socket error or timeout) before
 * its exchange ended, on every HTTP path: the agent must let go of its service connection at once,
 * not when the service answers.
 *
 * A reset alone is not enough: the unmodified @ngrok/ngrok agent ignores a stream's RST in its
 * copy to the service (the connection to the service stays open until the service answers),
 * while a FIN makes it close that connection. So a release sends FIN, then RST once the FIN is out
 * (or after a short grace when unsent bytes hold it behind a shut send window), which also makes
 * the edge forget the stream without waiting for the agent's own FIN.
 */
import type { Duplex } from 'node:stream';
import type { CounterSeries } from '../../metrics/metric-families.js';

/** How long a FIN may wait behind unsent bytes before the RST goes anyway. */
const FIN_GRACE_MS = 1000;

/**
 * FIN, then RST: the stream is released on both sides at once.
 * @example releaseStream(stream);
 */
export function releaseStream(stream: Duplex): void {
  if (stream.destroyed) return;
  // Ending a stream whose session failed may still emit 'error'; nobody is listening for it now.
  stream.on('error', ignoreError);
  if (stream.writableFinished) {
    stream.destroy();
    return;
  }
  const reset = (): void => {
    clearTimeout(timer);
    stream.destroy();
  };
  const timer = setTimeout(reset, FIN_GRACE_MS);
  timer.unref();
  stream.once('finish', reset);
  stream.once('close', reset);
  if (!stream.writableEnded) stream.end();
}

/**
 * Release `stream` because its client left before the exchange ended, counted in `released`
 * (`burrow_http_streams_released_total`).
 * @example releaseAbandoned(stream, ctx.released);
 */
export function releaseAbandoned(stream: Duplex, released: CounterSeries | undefined): void {
  released?.inc();
  releaseStream(stream);
}

function ignoreError(): void {}
