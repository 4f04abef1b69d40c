/**
 * The agent API on `web_addr` (127.0.0.1:4040 by default), in the shapes of ngrok's agent API:
 * `/api/tunnels` (list, start, get, stop), `/api/endpoints` (the same tunnels as version 3
 * endpoints), `/api/requests/http` (list with `limit` and `tunnel_name`, get, replay, clear),
 * `/api/status`; and the inspector's page and assets (web-inspector.ts). Bodies are JSON or
 * form-encoded, as ngrok's agent takes them.
 *
 * Access (web-access.ts decides): on loopback without a credential, only requests whose Host is
 * an IP or localhost (DNS rebinding) and, for changes, no foreign Origin (a web page posting a
 * form to 127.0.0.1:4040); with `--web-auth`, every request needs it.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { BurrowError, CODES } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { AgentApiError } from './errors.js';
import {
  endpointView,
  tunnelView,
  type EndpointView,
  type NamedTunnels,
  type RunningTunnel,
  type TunnelView,
} from './named-tunnels.js';
import { replayBytes, sendReplay, type ReplayChanges } from './replay.js';
import type { RequestLog } from './request-log.js';
import { checkWebAccess, type WebAccess } from './web-access.js';
import { INSPECTOR_ASSETS } from './web-inspector.js';

export interface WebApiOptions {
  tunnels: NamedTunnels;
  log: RequestLog;
  access: WebAccess;
  logger?: Logger;
  /** The agent's version, for `/api/status`. */
  version: string;
}

const MAX_BODY_BYTES = 1024 * 1024;

/** ngrok's error body: `{ error_code, status_code, msg, details }`. */
function sendError(res: ServerResponse, err: unknown): void {
  const status = err instanceof AgentApiError ? err.status : err instanceof BurrowError ? 400 : 500;
  const message = err instanceof Error ? err.message : String(err);
  const details: Record<string, string> = { err: message };
  if (err instanceof BurrowError && err.code) details.code = err.code;
  if (err instanceof AgentApiError && err.field) details.field = err.field;
  sendJson(res, status, {
    error_code: status === 404 ? 100 : status === 405 ? 101 : 102,
    status_code: status,
    msg: message,
    details,
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body, null, 2);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(text);
}

/** The body as fields: JSON (an object) or `application/x-www-form-urlencoded`. */
async function readFields(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES)
      throw new AgentApiError(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') {
    const fields: Record<string, unknown> = {};
    for (const [k, v] of new URLSearchParams(text)) fields[k] = v;
    return fields;
  }
  if (text.trim() === '') return {};
  if (type !== 'application/json' && type !== '') {
    throw new AgentApiError(
      415,
      `send the body as JSON (Content-Type: application/json) or as a form, not '${type}'`,
      { code: CODES.badContentType },
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new AgentApiError(400, `the body is not valid JSON: ${(err as Error).message}`, {
      code: CODES.malformedJson,
    });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new AgentApiError(400, 'the body must be a JSON object', { code: CODES.malformedJson });
  }
  return parsed as Record<string, unknown>;
}

const badField = (key: string, message: string): Error =>
  new AgentApiError(400, `${key}: ${message}`, { field: key, code: CODES.invalidValue });

function parseLimit(value: string | null): number | undefined {
  if (value === null || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw badField('limit', 'must be a whole number, 0 or more');
  return n;
}

function optionalText(fields: Record<string, unknown>, key: string): string | undefined {
  const v = fields[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw badField(key, 'must be a string');
  return v;
}

function replayChanges(fields: Record<string, unknown>): ReplayChanges | undefined {
  const headers = fields.headers;
  if (
    headers !== undefined &&
    (typeof headers !== 'object' || headers === null || Array.isArray(headers))
  ) {
    throw badField('headers', 'must be an object of header names to a value or a list of values');
  }
  const changes: ReplayChanges = {
    method: optionalText(fields, 'method'),
    uri: optionalText(fields, 'uri'),
    headers: headers as ReplayChanges['headers'],
    body: typeof fields.body === 'string' ? fields.body : undefined,
  };
  return Object.values(changes).some((v) => v !== undefined) ? changes : undefined;
}

/**
 * The request handler of the agent API and inspector.
 * @example http.createServer(webApi({ tunnels, log, access, version: '0.1.0' }))
 */
export function webApi(options: WebApiOptions): RequestListener {
  const { tunnels, log } = options;

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://agent');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    checkWebAccess(req, method, options.access);
    const parts = path
      .split('/')
      .filter((p) => p !== '')
      .map(decodeURIComponent);
    const notAllowed = (): never => {
      throw new AgentApiError(405, `${method} ${path} is not a method of this resource`);
    };

    if (parts[0] !== 'api') {
      const asset = INSPECTOR_ASSETS[path === '/' ? '/inspect/http' : path];
      if (!asset || method !== 'GET')
        throw new AgentApiError(
          404,
          `no page at ${path}; the inspector is at /inspect/http, the API under /api`,
        );
      res.writeHead(200, {
        'content-type': asset.type,
        'cache-control': 'no-store',
        // Everything is served from here: the inspector works with no connection to the outside.
        'content-security-policy':
          "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        'x-content-type-options': 'nosniff',
      });
      res.end(asset.body);
      return;
    }
    const [, resource, name, extra] = parts;
    if (resource === undefined) {
      if (method !== 'GET') notAllowed();
      sendJson(res, 200, {
        uri: '/api',
        tunnels_uri: '/api/tunnels',
        endpoints_uri: '/api/endpoints',
        requests_uri: '/api/requests/http',
        status_uri: '/api/status',
      });
      return;
    }
    if (resource === 'tunnels' || resource === 'endpoints') {
      const view = (t: RunningTunnel): TunnelView | EndpointView =>
        resource === 'tunnels' ? tunnelView(t) : endpointView(t);
      if (name === undefined) {
        if (method === 'GET') {
          const list = tunnels
            .list()
            .filter((t) => resource === 'tunnels' || t.definition.kind === 'endpoint');
          sendJson(res, 200, { [resource]: list.map(view), uri: `/api/${resource}` });
          return;
        }
        if (method !== 'POST') notAllowed();
        const fields = await readFields(req);
        const { name: given, ...rest } = fields;
        const tunnelName = typeof given === 'string' && given !== '' ? given : undefined;
        if (tunnelName === undefined && resource === 'tunnels')
          throw badField('name', 'is required: the name of the tunnel');
        // Loaded at the first start: it brings the policy engine, which `burrow http` needs not.
        const { definitionFromEndpoint, definitionFromTunnel } =
          await import('./tunnel-definition.js');
        const definition =
          resource === 'tunnels'
            ? definitionFromTunnel(tunnelName!, rest, badField)
            : definitionFromEndpoint(fields, tunnels.list().length, badField);
        sendJson(res, 201, view(await tunnels.start(definition)));
        return;
      }
      if (extra !== undefined) throw new AgentApiError(404, `no resource at ${path}`);
      const tunnel = tunnels.get(name);
      // /api/endpoints holds the version 3 endpoints only, as its list does.
      if (resource === 'endpoints' && tunnel.definition.kind !== 'endpoint') {
        throw new AgentApiError(
          404,
          `'${name}' is a tunnel, not a version 3 endpoint: it is at /api/tunnels/${encodeURIComponent(name)}`,
        );
      }
      if (method === 'GET') {
        sendJson(res, 200, view(tunnel));
        return;
      }
      if (method !== 'DELETE') notAllowed();
      await tunnels.stop(name);
      res.writeHead(204).end();
      return;
    }
    if (resource === 'requests' && name === 'http') {
      if (extra === undefined) {
        if (method === 'GET') {
          const tunnelName = url.searchParams.get('tunnel_name') ?? undefined;
          sendJson(res, 200, {
            uri: '/api/requests/http',
            requests: log.list(parseLimit(url.searchParams.get('limit')), tunnelName),
          });
          return;
        }
        if (method === 'DELETE') {
          log.clear();
          res.writeHead(204).end();
          return;
        }
        if (method !== 'POST') notAllowed();
        const fields = await readFields(req);
        const id = optionalText(fields, 'id');
        if (id === undefined)
          throw badField('id', 'is required: the id of the captured request to replay');
        const original = log.get(id);
        if (!original)
          throw new AgentApiError(
            404,
            `no captured request has the id '${id}' (the log keeps the newest requests only)`,
            { field: 'id' },
          );
        const tunnelName = optionalText(fields, 'tunnel_name') ?? original.tunnel_name;
        const tunnel = tunnels.get(tunnelName);
        const exchange = await sendReplay(
          tunnel.definition.addr,
          replayBytes(original, replayChanges(fields)),
        );
        const replayed = log.add(
          tunnelName,
          { ...exchange, clientAddr: original.remote_addr },
          original.id,
        );
        tunnel.http.record(exchange.durationMs);
        if (replayed) res.setHeader('burrow-replay-id', replayed.id);
        res.writeHead(204).end();
        return;
      }
      if (method !== 'GET') notAllowed();
      const found = log.get(extra);
      if (!found) throw new AgentApiError(404, `no captured request has the id '${extra}'`);
      sendJson(res, 200, found);
      return;
    }
    if (resource === 'status' && name === undefined) {
      if (method !== 'GET') notAllowed();
      const session = tunnels.sessionInfo;
      sendJson(res, 200, {
        uri: '/api/status',
        version: options.version,
        session: {
          server_addr: session?.serverAddr ?? null,
          client_id: session?.clientId ?? null,
          connected: session?.connected ?? false,
          latency_ms: session?.latency ?? null,
        },
        tunnels: tunnels.list().map(tunnelView),
      });
      return;
    }
    throw new AgentApiError(
      404,
      `no resource at ${path}; the API has /api/tunnels, /api/endpoints, /api/requests/http and /api/status`,
    );
  }

  return (req, res) => {
    route(req, res).catch((err: unknown) => {
      if (!(err instanceof BurrowError)) options.logger?.error({ err }, 'agent API request failed');
      if (res.headersSent) res.destroy();
      else {
        if (err instanceof AgentApiError && err.status === 401) {
          res.setHeader('www-authenticate', 'Basic realm="burrow agent", charset="UTF-8"');
        }
        sendError(res, err);
      }
    });
  };
}
