/**
 * Two byte streams joined both ways: a public connection and a tunnel stream at the edge, a
 * tunnel stream and a local service in the SDK. One implementation, so half-closes, back-pressure
 * and failures behave the same on both sides of a tunnel.
 */
import { pipeline, type Duplex } from 'node:stream';

/** Listeners a relayed stream may carry before Node warns of a leak (its default is 10). */
const RELAY_MAX_LISTENERS = 30;

/** An open relay. */
export interface Relay {
  /** Close both sides now. */
  destroy(): void;
}

/** Something that adds up bytes (a metrics counter). */
export interface ByteCounter {
  inc(n: number): void;
}

export interface RelayOptions {
  /** Counts bytes read from the first side. */
  bytesIn?: ByteCounter | undefined;
  /** Counts bytes read from the second side. */
  bytesOut?: ByteCounter | undefined;
  /** Runs once, when both sides are closed. */
  onClose?: (() => void) | undefined;
}

/**
 * Pipe `near` and `far` into each other until both directions ended, keeping half-closes (one
 * side's FIN becomes an end() on the other, the reverse direction goes on) and back-pressure. An
 * error or reset on either side closes both: the client sees a failure, never a truncated
 * success. `near` closed before `far` finished sending means nobody will read the rest.
 * @example relay(socket, stream, { bytesIn: meter.bytesIn, onClose: () => open.delete(socket) });
 */
export function relay(near: Duplex, far: Duplex, options: RelayOptions = {}): Relay {
  const { bytesIn, bytesOut, onClose } = options;
  if (bytesIn) near.on('data', (chunk: Buffer) => bytesIn.inc(chunk.length));
  if (bytesOut) far.on('data', (chunk: Buffer) => bytesOut.inc(chunk.length));
  // Each pipeline adds 'close' and 'error' listeners to both sides, on top of ours; a socket that
  // node:http hands over (an upgrade) already carries several, which tripped Node's leak warning.
  for (const side of [near, far]) {
    if (side.getMaxListeners() < RELAY_MAX_LISTENERS) side.setMaxListeners(RELAY_MAX_LISTENERS);
  }
  let open = 2;
  const closed = (): void => {
    if (--open === 0) onClose?.();
  };
  // Errors are expected (clients, agents and services vanish); pipeline destroyed both sides.
  pipeline(near, far, () => undefined);
  pipeline(far, near, () => undefined);
  near.once('close', () => {
    if (!far.readableEnded) far.destroy();
    closed();
  });
  far.once('close', () => {
    if (!near.writableFinished && !near.writableEnded) near.destroy();
    closed();
  });
  return {
    destroy() {
      near.destroy();
      far.destroy();
    },
  };
}
