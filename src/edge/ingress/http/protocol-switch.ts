/**
 * The one place a public HTTP connection stops being HTTP: after the agent answered an upgrade
 * (WebSocket and friends) with `101 Switching Protocols`, the connection and its tunnel stream are
 * joined as raw bytes until either side ends (response-relay.ts reads the agent's head and calls
 * this on a 101). Any other answer keeps the connection under
 * HTTP rules, so no request reaches the agent unjudged (the issue on protections that hold).
 */
import type { Duplex } from 'node:stream';
import { relay, type Relay } from '../../../core/relay.js';
import type { EndpointMeter } from '../../metrics/endpoint-meters.js';
import { relayTimeoutsFor, type RawRelayTimeouts } from '../proxy.js';
import type { PublicConnections } from './http-connections.js';

/** The raw relays of one ingress, and what they share. */
export interface RawRelays {
  /** Those open, for closing them all and counting open connections. */
  readonly open: Set<Relay>;
  /** When a relay ends for going quiet. */
  readonly timeouts: RawRelayTimeouts;
  readonly connections: PublicConnections;
}

/** What the client gets when the switch is made, and the bytes either side sent ahead of it. */
export interface Switch {
  /** The agent's header fields, as it sent them (checked: safe to write). */
  headers: readonly string[];
  /** Bytes the agent sent after its 101, for the client. */
  fromAgent?: Buffer | undefined;
  /** Bytes the client sent after its upgrade request, held until the 101, for the agent. */
  fromClient?: Buffer | undefined;
}

/**
 * Answer the client's upgrade with the agent's 101 and relay `socket` and `stream` raw from then
 * on, counted on `meter` as they pass. `socket` must have no reader left of its own.
 * @example switchProtocols(relays, socket, stream, meter, { headers: up.rawHeaders, fromAgent: upHead });
 */
export function switchProtocols(
  relays: RawRelays,
  socket: Duplex,
  stream: Duplex,
  meter: EndpointMeter,
  sw: Switch,
): void {
  relays.connections.handOver(socket, meter);
  let head = 'HTTP/1.1 101 Switching Protocols\r\n';
  const fields = sw.headers;
  for (let i = 0; i < fields.length; i += 2) head += `${fields[i]}: ${fields[i + 1]}\r\n`;
  socket.write(head + '\r\n', 'latin1');
  if (sw.fromAgent?.length) socket.write(sw.fromAgent);
  if (sw.fromClient?.length) stream.write(sw.fromClient);
  const open = relays.open;
  const relayed = relay(socket, stream, {
    bytesIn: meter.bytesIn,
    bytesOut: meter.bytesOut,
    onClose: () => open.delete(relayed),
    timeouts: relayTimeoutsFor(relays.timeouts, socket),
  });
  open.add(relayed);
  socket.resume();
}
