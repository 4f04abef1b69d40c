/**
 * The device agent's REST API: `GET /tunnels`, `POST /tunnels`, `DELETE /tunnels/{url_part}`
 * (a labeled tunnel's url_part is its labels, `app=web,site=a`: see tunnel-keys.ts).
 * One request handler serves both the local listener (`--listen`) and the exposed tunnel
 * (`--expose`); it is told which one a request came through.
 *
 * Access: with `--api-token`, every request needs `Authorization: Bearer <token>`, local ones
 * included (compared in constant time; 401 otherwise). Without a token the API is only served
 * locally, and only to requests whose Host is an IP address or a `localhost` name, so that a web
 * page cannot reach it through DNS rebinding; POST needs `Content-Type: application/json`, which
 * browsers cannot send across origins without a preflight this API never grants.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { CODES } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { AgentApiError } from './errors.js';
import { isDirectHost, tokenMatches } from './local-access.js';
import { parseTunnelRequest } from './tunnel-input.js';
import type { TunnelService } from './tunnel-endpoints.js';

/** Which listener a request came through. */
export type RequestSource = 'local' | 'exposed';

export interface LocalApiOptions {
  tunnels: TunnelService;
  /** `--api-token`: required on every request when set. */
  apiToken: string | undefined;
  logger: Logger;
}

/** Largest request body accepted. */
const MAX_BODY_BYTES = 1024 * 1024;

const ROUTES_HINT = 'the API has GET /tunnels, POST /tunnels and DELETE /tunnels/{url_part}';

export { isDirectHost, tokenMatches } from './local-access.js';

function authorize(
  req: IncomingMessage,
  source: RequestSource,
  apiToken: string | undefined,
): void {
  if (apiToken === undefined) {
    if (source === 'exposed') {
      throw new AgentApiError(401, 'this agent API is not served publicly without --api-token');
    }
    if (!isDirectHost(req.headers.host)) {
      throw new AgentApiError(
        403,
        `the Host '${req.headers.host ?? ''}' is refused: without --api-token the agent API answers only requests to an IP address or localhost (this blocks DNS rebinding); use http://127.0.0.1:<port>, or start the agent with --api-token`,
      );
    }
    return;
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m || !tokenMatches(m[1]!, apiToken)) {
    throw new AgentApiError(
      401,
      m
        ? 'the bearer token is wrong: send the agent\'s --api-token as "Authorization: Bearer <token>"'
        : 'authentication required: send the agent\'s --api-token as "Authorization: Bearer <token>"',
    );
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new AgentApiError(
      415,
      `send the body as JSON with "Content-Type: application/json" (got ${type === '' ? 'no Content-Type' : `'${type}'`})`,
      { code: CODES.badContentType },
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      throw new AgentApiError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') {
    throw new AgentApiError(400, 'the body is empty; send the tunnel as a JSON object', {
      code: CODES.malformedJson,
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new AgentApiError(400, `the body is not valid JSON: ${(err as Error).message}`, {
      code: CODES.malformedJson,
    });
  }
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (status === 204) {
    res.writeHead(204, { 'cache-control': 'no-store', ...headers }).end();
    return;
  }
  const text = JSON.stringify(body);
  res
    .writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(text)),
      'cache-control': 'no-store',
      ...headers,
    })
    .end(text);
}

function notAllowed(allow: string): AgentApiError & { allow: string } {
  return Object.assign(new AgentApiError(405, `use ${allow} here; ${ROUTES_HINT}`), { allow });
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  tunnels: TunnelService,
): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://agent').pathname;
  const method = req.method ?? 'GET';
  if (path === '/tunnels' || path === '/tunnels/') {
    if (method === 'GET') return send(res, 200, tunnels.list());
    if (method === 'POST') {
      const request = parseTunnelRequest(await readJson(req));
      return send(res, 200, await tunnels.create(request));
    }
    throw notAllowed('GET, POST');
  }
  const one = /^\/tunnels\/([^/]+)\/?$/.exec(path);
  if (one) {
    if (method !== 'DELETE') throw notAllowed('DELETE');
    let urlPart: string;
    try {
      urlPart = decodeURIComponent(one[1]!);
    } catch {
      throw new AgentApiError(400, `the url_part '${one[1]}' is not valid percent-encoding`);
    }
    await tunnels.remove(urlPart);
    return send(res, 204, undefined);
  }
  throw new AgentApiError(404, `no route ${method} ${path}; ${ROUTES_HINT}`);
}

/**
 * The request handler of the agent API for requests that came through `source`.
 * @example
 * const api = createAgentApi({ tunnels, apiToken, logger });
 * http.createServer(api('local')).listen(8000, '127.0.0.1');
 * session.httpEndpoint({ domain: 'agent.example.com', forward: api('exposed') });
 */
export function createAgentApi(
  options: LocalApiOptions,
): (source: RequestSource) => RequestListener {
  const { tunnels, apiToken, logger } = options;
  return (source) => (req, res) => {
    const started = performance.now();
    const handled = (async () => {
      authorize(req, source, apiToken);
      await route(req, res, tunnels);
    })();
    handled
      .catch((err: unknown) => {
        if (err instanceof AgentApiError) {
          const allow = (err as Partial<{ allow: string }>).allow;
          const headers: Record<string, string> = allow ? { allow } : {};
          if (err.status === 401) headers['www-authenticate'] = 'Bearer realm="burrow agent"';
          send(res, err.status, err.body(), headers);
          return;
        }
        logger.error({ err }, 'agent API request failed');
        send(res, 500, { error: `internal error: ${(err as Error).message}` });
      })
      .finally(() => {
        // Unread bodies (refused requests) must not hold the connection.
        if (!req.complete) req.resume();
        logger.info(
          {
            source,
            method: req.method,
            path: req.url,
            status: res.statusCode,
            ms: Math.round(performance.now() - started),
          },
          'agent API request',
        );
      })
      .catch(() => undefined);
  };
}
