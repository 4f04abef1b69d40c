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
  /** Close both sides when the relay goes quiet; default: never (the SDK's side of a tunnel). */
  timeouts?: RelayTimeouts | undefined;
}

/** Why a relay was closed by its {@link RelayTimeouts}. */
export type RelayTimeoutReason = 'idle' | 'half_closed';

/**
 * Inactivity limits of a relay, as TCP proxies have them (Envoy's tcp_proxy `idle_timeout`,
 * HAProxy's `timeout client` and `timeout client-fin`): a byte either way restarts the clock.
 */
export interface RelayTimeouts {
  /** No byte either way for this long: both sides closed. */
  idleMs: number;
  /** The same once one side has ended (sent its FIN): a half-closed relay ends sooner. */
  halfClosedMs: number;
  /** Told before both sides are closed for going quiet. */
  onTimeout?: ((reason: RelayTimeoutReason) => void) | undefined;
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
  const destroy = (): void => {
    near.destroy();
    far.destroy();
  };
  if (options.timeouts) {
    const stop = closeWhenQuiet(near, far, options.timeouts, destroy);
    near.once('close', stop);
    far.once('close', stop);
  }
  return { destroy };
}

/**
 * Call `destroy` once neither side has read a byte for the idle time (the shorter half-closed
 * time once either side ended). Activity only stamps the time; one timer checks it when due,
 * so a busy relay costs no timer work per chunk. Returns a stop for when the relay closes.
 */
function closeWhenQuiet(
  near: Duplex,
  far: Duplex,
  timeouts: RelayTimeouts,
  destroy: () => void,
): () => void {
  let lastActive = Date.now();
  let halfClosed = false;
  let timer: NodeJS.Timeout | undefined;
  const limit = (): number =>
    halfClosed ? Math.min(timeouts.idleMs, timeouts.halfClosedMs) : timeouts.idleMs;
  const check = (): void => {
    const left = lastActive + limit() - Date.now();
    if (left > 0) {
      arm(left);
      return;
    }
    timer = undefined;
    timeouts.onTimeout?.(halfClosed ? 'half_closed' : 'idle');
    destroy();
  };
  const arm = (ms: number): void => {
    clearTimeout(timer);
    timer = setTimeout(check, ms);
    // A relay waiting to time out must not keep a process alive that has nothing else to do.
    timer.unref();
  };
  const active = (): void => {
    lastActive = Date.now();
  };
  const ended = (): void => {
    if (halfClosed) return;
    halfClosed = true;
    active();
    arm(limit());
  };
  near.on('data', active);
  far.on('data', active);
  near.once('end', ended);
  far.once('end', ended);
  arm(limit());
  return () => clearTimeout(timer);
}
