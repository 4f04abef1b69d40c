/**
 * The TLS side of node links: both ends show a certificate of the cluster CA (cluster-ca.ts) and
 * check the other's, TLS 1.3 only, ALPN `burrow-node/1`. The dialer checks that the certificate
 * names the node it meant to reach; the acceptor learns who dialled from the certificate's CN.
 * In TLS 1.3 the dialer's handshake ends before the acceptor has judged the dialer's certificate,
 * so the acceptor sends LINK_GREETING once it accepted the link, and the dialer waits for it.
 */
import { once } from 'node:events';
import * as tls from 'node:tls';
import { nodeIdProblem } from '../../core/cluster-config.js';
import { formatHostPort, parseHostPort } from '../../core/host-port.js';
import { readExactly } from '../../protocol/tunnel/reader.js';
import { gateConnections, type RefusalLog } from '../listeners/connection-gate.js';
import { enforceHandshakeDeadline } from '../listeners/handshake-deadline.js';
import type { NodeCredentials } from './cluster-ca.js';
import { LINK_GREETING, NODE_ALPN, withDeadline } from './node-link-wire.js';

/** TCP keep-alive on links, so a peer that vanished without closing is noticed eventually. */
export const KEEPALIVE_MS = 10_000;

/**
 * Connections the node-link listener holds at once: a node keeps one link per peer (two while
 * both dial at once), so these leave room for 64 nodes and refuse a flood from one address early.
 */
export const NODE_LINK_CAPS = { name: 'node_link', maxTotal: 64, maxPerIp: 8 } as const;

/**
 * The listener for links other nodes dial: it asks for and requires a cluster certificate. Like
 * every TLS listener of the edge, it caps its connections (NODE_LINK_CAPS), a handshake gets a
 * fixed deadline and a failed one is closed (enforceHandshakeDeadline).
 * @example const server = nodeLinkServer(credentials, 10_000, new RefusalLog(logger, metrics));
 */
export function nodeLinkServer(
  credentials: NodeCredentials,
  handshakeDeadlineMs: number,
  refusals: RefusalLog,
): tls.Server {
  const server = tls.createServer({
    ca: credentials.caPem,
    cert: credentials.certPem,
    key: credentials.keyPem,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.3',
    ALPNProtocols: [NODE_ALPN],
  });
  gateConnections(server, NODE_LINK_CAPS, refusals);
  enforceHandshakeDeadline(server, handshakeDeadlineMs);
  return server;
}

/**
 * A TLS connection to node `peer.id` at `peer.address`, accepted by it (greeting read). Rejects
 * with a plain Error saying what went wrong; the socket is destroyed then.
 * @example const socket = await dialNode({ id: 'edge-b', address: '10.0.0.6:7443' }, credentials, 10_000);
 */
export async function dialNode(
  peer: { id: string; address: string },
  credentials: NodeCredentials,
  timeoutMs: number,
): Promise<tls.TLSSocket> {
  const target = parseHostPort(peer.address, { minPort: 1 });
  if (!target) throw new Error('the address is not host:port');
  const socket = tls.connect({
    host: target.host,
    port: target.port,
    ca: credentials.caPem,
    cert: credentials.certPem,
    key: credentials.keyPem,
    minVersion: 'TLSv1.3',
    ALPNProtocols: [NODE_ALPN],
    checkServerIdentity: (_host, cert) => {
      const name = commonName(cert.subject);
      if (name === peer.id) return undefined;
      return new Error(`its certificate names node ${name ?? '(none)'}`);
    },
  });
  socket.setNoDelay(true);
  socket.setKeepAlive(true, KEEPALIVE_MS);
  // Reported through the handshake below; the caller's session listens once it exists.
  const ignore = (): void => undefined;
  socket.on('error', ignore);
  try {
    const greeting = await withDeadline(
      once(socket, 'secureConnect').then(() => readExactly(socket, LINK_GREETING.length)),
      timeoutMs,
      () => new Error(`no answer within ${timeoutMs} ms`),
    );
    if (socket.alpnProtocol !== NODE_ALPN || !greeting.equals(LINK_GREETING)) {
      throw new Error('it does not speak the node link protocol');
    }
    return socket;
  } catch (err) {
    socket.destroy();
    throw err;
  } finally {
    socket.off('error', ignore);
  }
}

/**
 * Who dialled, from an accepted connection: the node its certificate names, or why the link is
 * refused (no valid node certificate, another ALPN, or our own node id).
 * @example const peer = acceptedPeer(socket, 'edge-a'); if ('problem' in peer) socket.destroy();
 */
export function acceptedPeer(
  socket: tls.TLSSocket,
  ownId: string,
): { peerId: string } | { problem: string; peerId?: string | undefined } {
  const peerId = commonName(socket.getPeerCertificate().subject);
  if (!socket.authorized || peerId === undefined || nodeIdProblem(peerId) !== undefined) {
    return { problem: 'no valid node certificate', peerId };
  }
  if (socket.alpnProtocol !== NODE_ALPN) {
    return { problem: `ALPN ${String(socket.alpnProtocol)}`, peerId };
  }
  if (peerId === ownId) return { problem: 'it has our own node id', peerId };
  return { peerId };
}

/**
 * `advertise` as host:port, the bound port filling in a missing or 0 one; undefined when absent
 * or not an address.
 * @example advertisedAddress('node-a.internal', 7443) // 'node-a.internal:7443'
 */
export function advertisedAddress(
  advertise: string | undefined,
  boundPort: number,
): string | undefined {
  if (!advertise) return undefined;
  const parsed = parseHostPort(advertise, { port: 'optional' });
  if (!parsed) return undefined;
  return formatHostPort(parsed.host, parsed.port || boundPort);
}

/** The CN of a certificate subject, when it has exactly one. */
function commonName(subject: { CN?: string | string[] } | undefined): string | undefined {
  const cn = subject?.CN;
  return typeof cn === 'string' ? cn : undefined;
}
