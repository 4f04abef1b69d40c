/**
 * The public connections of the HTTP ingress (plain and TLS-terminated) and what they count: each
 * belongs to the endpoint of its first routed request, and the bytes it moves are added to that
 * endpoint's meter as requests finish and when it closes.
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EndpointMeter, EndpointMeters } from '../../metrics/endpoint-meters.js';

/** What is tracked per public connection. */
export interface ConnectionState {
  /** The socket bytes are read from: the TCP socket under a TLS one. */
  wire: Socket;
  meter: EndpointMeter | undefined;
  closeConnection: (() => void) | undefined;
  read: number;
  written: number;
}

/**
 * @example
 * const connections = new PublicConnections(meters);
 * server.on('connection', (socket) => connections.track(socket, socket));
 */
export class PublicConnections {
  private readonly states = new WeakMap<Duplex, ConnectionState>();
  private readonly open = new Set<Duplex>();

  constructor(private readonly meters: EndpointMeters) {}

  /** How many are open. */
  get size(): number {
    return this.open.size;
  }

  /** Follow `socket` until it closes; `wire` is the TCP socket under it (itself when plain). */
  track(socket: Duplex, wire: Socket): void {
    if (this.states.has(socket)) return;
    const state: ConnectionState = {
      wire,
      meter: undefined,
      closeConnection: undefined,
      read: wire.bytesRead,
      written: wire.bytesWritten,
    };
    this.states.set(socket, state);
    this.open.add(socket);
    socket.once('close', () => {
      this.open.delete(socket);
      this.countBytes(state);
      state.closeConnection?.();
    });
  }

  /** Add the bytes the connection moved since last time to its endpoint. */
  countBytes(state: ConnectionState): void {
    if (!state.meter) return;
    const read = state.wire.bytesRead;
    const written = state.wire.bytesWritten;
    state.meter.bytesIn.inc(read - state.read);
    state.meter.bytesOut.inc(written - state.written);
    state.read = read;
    state.written = written;
  }

  /** The connection's state, attributing it to `meter` when it is its first routed request. */
  attribute(socket: Duplex, meter: EndpointMeter): ConnectionState | undefined {
    const state = this.states.get(socket);
    if (state && state.meter !== meter) {
      this.countBytes(state);
      if (!state.closeConnection) state.closeConnection = this.meters.connectionOpened(meter);
      state.meter = meter;
    }
    return state;
  }

  /**
   * Attribute `socket` to `meter` and settle its bytes so far, for a connection that becomes a
   * raw relay: from then on the relay counts its bytes as they pass.
   */
  handOver(socket: Duplex, meter: EndpointMeter): void {
    const state = this.attribute(socket, meter);
    if (!state) return;
    this.countBytes(state);
    state.meter = undefined;
  }

  destroyAll(): void {
    for (const socket of this.open) socket.destroy();
  }
}
