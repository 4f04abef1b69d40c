/**
 * One connection of a session to the edge: TLS dial, the muxado session, the heartbeat and the
 * Auth exchange. The session opens a new link after each loss and resumes on it.
 */
import type { TLSSocket } from 'node:tls';
import {
  type Heartbeat,
  MuxSession,
  type MuxStream,
  READ_SLAB_SIZE,
  SlabLender,
  StreamType,
  TypedSession,
  call,
  windowForAlpn,
} from '../protocol/index.js';
import { dialEdge } from './dial.js';
import { toAgentError } from './errors.js';
import { authRequest, RPC_TIMEOUT_MS, type SessionSettings } from './options.js';
import { serveServerStream, type ServerStreamHost } from './server-streams.js';

/**
 * The slabs the process's service sockets read into during bulk transfers (forward.ts), shared
 * by its sessions: each slab is read into again once the link has written what was read into it.
 * At most 8 spare slabs (2 MiB) are kept.
 */
const SERVICE_READS = new SlabLender(READ_SLAB_SIZE, 8);

/** An authenticated connection to the edge. */
export interface Link {
  socket: TLSSocket;
  mux: MuxSession;
  heartbeat: Heartbeat;
  connectedAt: number;
}

/** Who the edge knows the session as; empty strings ask for a new session. */
export interface SessionIdentity {
  clientId: string;
  cookie: string;
}

/**
 * Dial the edge and authenticate, resuming `identity` when it names a session. Streams the edge
 * opens are served by `host`; heartbeat round-trips go to `onBeat`. Rejects with a
 * BurrowAgentError carrying the server's code when the Auth is refused.
 * @example const { link, identity } = await openLink(settings, { clientId: '', cookie: '' }, session, () => {});
 */
export async function openLink(
  settings: SessionSettings,
  identity: SessionIdentity,
  host: ServerStreamHost,
  onBeat: (latencyMs: number) => void,
): Promise<{ link: Link; identity: SessionIdentity }> {
  const socket = await dialEdge({
    address: settings.address,
    trust: settings.trust,
    serverName: settings.serverName,
    offerAlpn: settings.largeWindow,
    timeoutMs: settings.connectTimeout,
  });
  socket.on('error', () => {
    // The session reports the loss through its 'close'.
  });
  const mux = new MuxSession(socket, {
    role: 'client',
    window: windowForAlpn(socket.alpnProtocol),
    sendLender: SERVICE_READS,
  });
  const typed = new TypedSession(mux);
  typed.on('stream', (stream: MuxStream, type: number) =>
    serveServerStream(host, mux, stream, type),
  );
  // The heartbeat stream comes first, as with the other SDKs; the edge echoes before Auth.
  const heartbeat = typed.startHeartbeat({
    interval: settings.heartbeatInterval,
    tolerance: settings.heartbeatTolerance,
  });
  heartbeat.on('beat', onBeat);
  try {
    const reply = await call(mux, StreamType.Auth, authRequest(settings, identity), {
      timeoutMs: RPC_TIMEOUT_MS,
    });
    return {
      link: { socket, mux, heartbeat, connectedAt: Date.now() },
      identity: { clientId: reply.ClientId, cookie: reply.Extra?.Cookie ?? '' },
    };
  } catch (err) {
    heartbeat.stop();
    mux.destroy();
    throw toAgentError(err, 'failed to authenticate');
  }
}
