import type { Socket } from 'node:net';
import type { Server, TLSSocket } from 'node:tls';
import type { Logger } from '../../core/logger.js';

/** How long a TLS handshake may take from the first byte, unless a listener says otherwise. */
export const DEFAULT_HANDSHAKE_DEADLINE_MS = 10_000;

/**
 * The peer address and port of a raw socket, which the TLSSocket wrapping it shares: how a TLS
 * server's 'secureConnection' socket is matched with the raw one handed to it.
 * @example connectionKey(raw) === connectionKey(tlsSocket)
 */
export function connectionKey(socket: Socket): string {
  return `${socket.remoteAddress ?? ''}|${socket.remotePort ?? ''}`;
}

/**
 * Give every connection of `server` a fixed deadline to finish its TLS handshake, and close any
 * connection whose handshake fails.
 *
 * Node's own `handshakeTimeout` falls short twice: it is an idle timer, so a client that trickles
 * a byte every few seconds never meets it, and when a 'tlsClientError' listener exists (we log
 * failures) Node leaves closing the socket to that listener. Without both fixes, stalled
 * handshakes hold a file descriptor each for ever.
 *
 * The deadline runs on the raw socket from the moment the TLS server sees it (its 'connection'
 * event, which also fires for sockets handed over with `server.emit('connection', socket)`).
 *
 * @example
 * const server = tls.createServer({ cert, key });
 * enforceHandshakeDeadline(server, 10_000, logger);
 */
export function enforceHandshakeDeadline(
  server: Server,
  deadlineMs: number = DEFAULT_HANDSHAKE_DEADLINE_MS,
  logger?: Logger,
): void {
  // The TLSSocket of 'secureConnection' wraps the raw socket of 'connection'; its peer address
  // and port name it as long as both are open.
  const pending = new Map<string, NodeJS.Timeout>();
  server.on('connection', (raw: Socket) => {
    const key = connectionKey(raw);
    const timer = setTimeout(() => {
      logger?.debug({ client: raw.remoteAddress }, 'TLS handshake took too long: closing');
      raw.destroy();
    }, deadlineMs);
    timer.unref();
    pending.set(key, timer);
    raw.once('close', () => {
      clearTimeout(timer);
      if (pending.get(key) === timer) pending.delete(key);
    });
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    const key = connectionKey(socket);
    clearTimeout(pending.get(key));
    pending.delete(key);
  });
  server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
    logger?.debug({ err: err.message, servername: socket.servername }, 'TLS handshake failed');
    socket.destroy();
  });
}
