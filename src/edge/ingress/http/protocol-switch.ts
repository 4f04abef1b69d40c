/**
 * The one place a public HTTP connection stops being HTTP: after the agent answered an upgrade
 * (WebSocket and friends) with `101 Switching Protocols`, the connection and its tunnel stream are
 * joined as raw bytes until either side ends (response-relay.ts reads the agent's head and calls
 * this on a 101; h2-exchange.ts does the same for an HTTP/2 client's extended CONNECT). Any other answer keeps the connection under
 * HTTP rules, so no request reaches the agent unjudged (the issue on protections that hold).
 */
import { constants, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
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
  startRelay(relays, socket, stream, meter, socket);
  socket.resume();
}

/**
 * The same for an HTTP/2 client's extended CONNECT (RFC 8441, WebSocket over HTTP/2): the agent's
 * 101 is answered `200` on the client's stream (with the agent's other headers, less what only
 * HTTP/1.1's handshake carries), and the stream and the tunnel stream are relayed raw from then on.
 * The connection's other streams go on.
 * @example switchH2Stream(relays, req.stream, socket, stream, meter, { headers: response.raw });
 */
export function switchH2Stream(
  relays: RawRelays,
  h2: ServerHttp2Stream,
  connection: Duplex,
  stream: Duplex,
  meter: EndpointMeter,
  sw: Pick<Switch, 'fromAgent'> & { headers: OutgoingHttpHeaders },
): void {
  const headers: OutgoingHttpHeaders = { ...sw.headers, ':status': 200 };
  // RFC 8441 §5: no Sec-WebSocket-Key / -Accept on HTTP/2; the edge made the key it answers.
  delete headers['sec-websocket-accept'];
  try {
    h2.respond(headers);
  } catch {
    // A header Node will not send on HTTP/2: the switch cannot be told to the client.
    stream.destroy();
    h2.close(constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  if (sw.fromAgent?.length) h2.write(sw.fromAgent);
  startRelay(relays, h2, stream, meter, connection);
}

/** Relay `client` and `stream` raw, counted on `meter`, with `relays`' idle limits for `connection`. */
function startRelay(
  relays: RawRelays,
  client: Duplex,
  stream: Duplex,
  meter: EndpointMeter,
  connection: Duplex,
): void {
  const open = relays.open;
  const relayed = relay(client, stream, {
    bytesIn: meter.bytesIn,
    bytesOut: meter.bytesOut,
    onClose: () => open.delete(relayed),
    timeouts: relayTimeoutsFor(relays.timeouts, connection),
  });
  open.add(relayed);
}
