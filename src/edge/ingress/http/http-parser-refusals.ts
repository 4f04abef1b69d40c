import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RefusalLog } from '../../listeners/connection-gate.js';
import { clientIp } from '../../registry/connect-tunnel.js';

/** Node's parser errors that are our limits, with the status HTTP gives each. */
const LIMIT_ERRORS: Record<string, { status: number; limit: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, limit: 'ingress_header_bytes' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, limit: 'ingress_headers_timeout' },
};

/**
 * The answer to a request the ingress will not read: its status, no body, and the connection
 * closed. Both HTTP paths (Node's parser errors here, the lean relay's own) answer with it.
 * @example socket.end(bareRefusal(431));
 */
export function bareRefusal(status: number): string {
  const reason = STATUS_CODES[status] ?? 'Bad Request';
  return `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`;
}

/**
 * Answer what Node's HTTP parser refuses before any request exists (headers too large, headers
 * too slow, malformed bytes) with the protocol's own status, and count the refusals that are
 * limits in /metrics like every other limit, logged once per client per minute.
 * @example answerParserErrors(ingress.server, refusals);
 */
export function answerParserErrors(server: Server, refusals: RefusalLog): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const known = err.code ? LIMIT_ERRORS[err.code] : undefined;
    if (known) {
      refusals.refused(clientIp(socket as { remoteAddress?: string }), known.limit);
    }
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(bareRefusal(known?.status ?? 400));
  });
}
