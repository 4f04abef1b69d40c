/**
 * Replay a captured request to the local service of its tunnel (as ngrok's agent does: from the
 * agent to the upstream, not through the edge), optionally with changes (method, path, headers,
 * body), and capture the exchange like any other, so it shows in the inspector.
 */
import net from 'node:net';
import tls from 'node:tls';
import { fieldProblem, isTargetText } from '../core/http-wire.js';
import { parseLocalAddress } from '../sdk/forward.js';
import { HttpObserver, type HttpExchange } from '../sdk/http-observer.js';
import { AgentApiError } from './errors.js';
import { CAPTURE_BYTES, splitMessage, type CapturedRequest } from './request-log.js';

/** What a replay may change (Burrow's additions to ngrok's `POST /api/requests/http`). */
export interface ReplayChanges {
  method?: string;
  uri?: string;
  /** Replaces every header (Content-Length is set from the body). */
  headers?: Record<string, string | string[]>;
  /** The new body as text. */
  body?: string;
}

/** How long the local service has to answer a replay. */
const REPLAY_TIMEOUT_MS = 30_000;

/** A chunked body's data, its framing removed. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const nl = body.indexOf('\r\n', at);
    if (nl < 0) break;
    const size = parseInt(body.toString('latin1', at, nl).split(';')[0]!, 16);
    if (!Number.isFinite(size) || size <= 0) break;
    parts.push(body.subarray(nl + 2, nl + 2 + size));
    at = nl + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * The bytes of the replayed request: the captured ones as they were, or rebuilt with `changes`
 * (then with `Content-Length` for the body and without `Transfer-Encoding`).
 */
export function replayBytes(original: CapturedRequest, changes: ReplayChanges | undefined): Buffer {
  const raw = Buffer.from(original.request.raw, 'base64');
  const changed = changes && Object.values(changes).some((v) => v !== undefined);
  if (original.request.truncated && changes?.body === undefined) {
    throw new AgentApiError(
      400,
      `request ${original.id} was captured only up to ${raw.length} of its ${original.request.size} bytes, so it cannot be replayed as it was; replay it with a body`,
      { field: 'id' },
    );
  }
  if (!changed) return raw;
  const { headers: oldHeaders, body: oldBody } = splitMessage(raw);
  const chunked = (oldHeaders['Transfer-Encoding'] ?? []).some((v) => /chunked/i.test(v));
  const body =
    changes.body !== undefined
      ? Buffer.from(changes.body, 'utf8')
      : chunked
        ? dechunk(oldBody)
        : oldBody;
  const headers: Array<[string, string]> = [];
  for (const [name, values] of Object.entries(changes.headers ?? oldHeaders)) {
    if (/^(content-length|transfer-encoding|connection)$/i.test(name)) continue;
    for (const value of Array.isArray(values) ? values : [values]) {
      const problem = fieldProblem(name, value);
      if (problem) throw new AgentApiError(400, `headers: ${problem}`, { field: 'headers' });
      headers.push([name, value]);
    }
  }
  const method = changes.method ?? original.request.method;
  const uri = changes.uri ?? original.request.uri;
  if (!/^[A-Z]+$/.test(method))
    throw new AgentApiError(400, 'method: must be an HTTP method in capitals, e.g. POST', {
      field: 'method',
    });
  if (!isTargetText(uri))
    throw new AgentApiError(
      400,
      'uri: must be a request target without spaces or control characters, e.g. /hook?x=1',
      { field: 'uri' },
    );
  if (body.length > 0 || /^(POST|PUT|PATCH)$/.test(method))
    headers.push(['Content-Length', String(body.length)]);
  headers.push(['Connection', 'close']);
  const head = `${method} ${uri} HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

/**
 * Send `bytes` to the service at `addr` and resolve with the captured exchange once its answer
 * has ended; a service that cannot be reached or does not answer is a 502.
 * @example const exchange = await sendReplay('localhost:3000', replayBytes(captured, undefined));
 */
export async function sendReplay(addr: string, bytes: Buffer): Promise<HttpExchange> {
  const target = parseLocalAddress(addr);
  const socket: net.Socket = target.tls
    ? tls.connect({
        host: target.host,
        port: target.port,
        rejectUnauthorized: false,
        ...(net.isIP(target.host) ? {} : { servername: target.host }),
      })
    : net.connect({ host: target.host, port: target.port });
  return new Promise<HttpExchange>((resolve, reject) => {
    let done = false;
    const finish = (error: Error | undefined, exchange?: HttpExchange): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(exchange!);
    };
    const observer = new HttpObserver('127.0.0.1:0', (x) => finish(undefined, x), CAPTURE_BYTES);
    const timer = setTimeout(
      () =>
        finish(
          new AgentApiError(
            502,
            `the service at ${addr} did not answer the replay within ${REPLAY_TIMEOUT_MS / 1000} s`,
          ),
        ),
      REPLAY_TIMEOUT_MS,
    );
    socket.once(target.tls ? 'secureConnect' : 'connect', () => {
      observer.request(bytes);
      socket.write(bytes);
    });
    socket.on('data', (chunk: Buffer) => observer.response(chunk));
    socket.once('error', (err) =>
      finish(
        new AgentApiError(
          502,
          `cannot replay to ${addr}: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
        ),
      ),
    );
    socket.once('close', () => {
      observer.close();
      finish(
        new AgentApiError(
          502,
          `the service at ${addr} closed the connection without a complete answer`,
        ),
      );
    });
  });
}
