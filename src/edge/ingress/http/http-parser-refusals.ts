import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RefusalLog } from '../../listeners/connection-gate.js';

/** Node's parser errors that are our limits, with the status HTTP gives each. */
const LIMIT_ERRORS: Record<string, { status: number; reason: string; limit: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    limit: 'ingress_header_bytes',
  },
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    limit: 'ingress_headers_timeout',
  },
};

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
      const ip = (socket as { remoteAddress?: string }).remoteAddress ?? '';
      refusals.refused(ip.replace(/^::ffff:/, ''), known.limit);
    }
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = known?.status ?? 400;
    const reason = known?.reason ?? 'Bad Request';
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });
}
