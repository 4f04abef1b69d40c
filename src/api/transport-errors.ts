import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { errorBody, sendError } from './error-handler.js';

/**
 * Failures that happen before (or outside) Fastify's request lifecycle, answered with the same body
 * and Operation-Id header as every other error:
 * - errors of the router (malformed percent-encoding, an over-long path parameter), which Fastify
 *   hands to `frameworkErrors` instead of the error handler;
 * - errors of Node's HTTP parser (headers over 16 KiB, request timeouts, bytes that are not
 *   HTTP), which reach the server's 'clientError' event with no request object at all;
 * - requests that arrive on a kept-alive connection while the server is closing, which Fastify
 *   would otherwise answer with a 503 body of its own.
 */

/** Fastify's `frameworkErrors` option: route the router's errors through sendError. */
export function frameworkErrors(
  err: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  void sendError(err, request, reply);
}

/** What Node's parser error means for the client, by its code. */
function parserError(code: string | undefined): BurrowError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new BurrowError(
        CODES.unreadableBody,
        431,
        'The request line and headers are too large (limit 16 KiB in all). Send shorter headers and URL.',
      );
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new BurrowError(
        CODES.unreadableBody,
        408,
        'The request took too long to arrive. Send it again.',
      );
    default:
      return new BurrowError(
        CODES.unreadableBody,
        400,
        `The request is not valid HTTP/1.1 (${code ?? 'parse error'}). Check the client or proxy that sent it.`,
      );
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/**
 * Fastify's `clientErrorHandler` option, called for the server's 'clientError' event: write a
 * whole HTTP response with the Burrow body by hand (there is no request or reply object), then
 * close the connection, since the parser cannot resume after the bad bytes.
 */
export function clientErrorHandler(
  this: FastifyInstance,
  err: Error & { code?: string },
  socket: Socket,
): void {
  // The client is gone: nothing to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // Like Node's own default: write only when no response is under way on this socket, since bytes
  // in the middle of one would corrupt it. `_httpMessage` is Node's (undocumented) link from the
  // socket to the response it is writing.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })
    ._httpMessage;
  const burrowErr = parserError(err.code);
  const operationId = newId(ID_PREFIX.operation);
  this.log.debug({ err, operationId }, 'malformed request');
  if (!socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(burrowErr, operationId));
  const response =
    `HTTP/1.1 ${burrowErr.statusCode} ${STATUS_TEXT[burrowErr.statusCode] ?? 'Bad Request'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `Operation-Id: ${operationId}\r\n` +
    `Ngrok-Operation-Id: ${operationId}\r\n` +
    'Connection: close\r\n' +
    '\r\n' +
    body;
  // end() flushes the response before closing; destroy() once it is out, whether or not the client
  // ever closes its side.
  socket.end(response, () => socket.destroy());
}

/**
 * Answer requests that arrive while the server closes with a 503 in the Burrow shape. Fastify's
 * own 503 (`return503OnClosing`) bypasses every hook, so the app turns it off and this onRequest
 * hook takes its place; Fastify still sets `Connection: close` on those replies.
 */
export function installClosingGuard(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', async () => {
    if (closing) {
      throw new BurrowError(
        undefined,
        503,
        'The server is shutting down. Send the request again; another instance, or this one once restarted, will answer.',
      );
    }
  });
}
