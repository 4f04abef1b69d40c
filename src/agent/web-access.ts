/**
 * Where the agent API and inspector listen (`web_addr`, `--web-addr`) and who may use them.
 *
 * - The default is 127.0.0.1:4040; when that port is taken the next free one (up to 4050) is
 *   used, as ngrok's agent does; `false` turns the API off.
 * - On a loopback address without a credential, a request must name the machine directly in its
 *   Host (an IP or localhost: this blocks DNS rebinding), and a change (POST, DELETE) must not
 *   come from another site's page (its Origin or Sec-Fetch-Site), since the API takes form
 *   bodies a page could post.
 * - On any other address the API would be open to the network: it refuses to start without a
 *   credential (`--web-auth user:password`, HTTP Basic), warns, and then asks it of every request.
 */
import type { IncomingMessage, RequestListener, Server } from 'node:http';
import http from 'node:http';
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import { isLoopbackHost } from '../core/hostname.js';
import { AgentApiError, AgentStartupError } from './errors.js';
import { isDirectHost, tokenMatches } from './local-access.js';

/** ngrok's default `web_addr`. */
export const DEFAULT_WEB_ADDR = '127.0.0.1:4040';
/** How many ports after a taken default are tried. */
const NEXT_PORTS = 10;

/** Who may use the API. */
export interface WebAccess {
  /** `user:password` for HTTP Basic, required on every request when set. */
  credential: string | undefined;
}

/**
 * `web_addr` as host and port: `host:port`, a port alone (on 127.0.0.1), `false` (off).
 * @example parseWebAddr('4041') // { host: '127.0.0.1', port: 4041 }
 * @example parseWebAddr('false') // false
 */
export function parseWebAddr(
  value: string | false | undefined,
): { host: string; port: number } | false {
  if (value === false || value === 'false') return false;
  const text = (value ?? DEFAULT_WEB_ADDR).trim();
  if (/^\d+$/.test(text)) return { host: '127.0.0.1', port: Number(text) };
  const parsed = parseHostPort(text);
  if (!parsed || parsed.port === undefined) {
    throw new AgentStartupError(
      `web_addr '${text}' must be host:port (e.g. 127.0.0.1:4040), a port, or false to turn the agent API off`,
    );
  }
  return { host: parsed.host === 'localhost' ? '127.0.0.1' : parsed.host, port: parsed.port };
}

/** Check a request against `access`; throws a 401 or 403 {@link AgentApiError}. */
export function checkWebAccess(req: IncomingMessage, method: string, access: WebAccess): void {
  if (access.credential !== undefined) {
    const m = /^Basic\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const given = m ? Buffer.from(m[1]!, 'base64').toString('utf8') : undefined;
    if (given === undefined || !tokenMatches(given, access.credential)) {
      throw new AgentApiError(
        401,
        'this agent API asks for its credential (--web-auth): send it as HTTP Basic user:password',
      );
    }
  } else if (!isDirectHost(req.headers.host)) {
    throw new AgentApiError(
      403,
      `the Host '${req.headers.host ?? ''}' is refused: the agent API answers only requests to an IP address or localhost (this blocks DNS rebinding); use http://127.0.0.1:<port>`,
    );
  }
  if (method === 'GET' || method === 'HEAD') return;
  const origin = req.headers.origin;
  const site = req.headers['sec-fetch-site'];
  const sameOrigin = origin === undefined || origin === `http://${req.headers.host ?? ''}`;
  if (!sameOrigin || (site !== undefined && site !== 'same-origin' && site !== 'none')) {
    throw new AgentApiError(
      403,
      `a change from another site's page (Origin ${origin ?? site ?? ''}) is refused: the agent API takes changes from its own inspector and from programs such as curl`,
    );
  }
}

/** The listening agent API. */
export interface WebListener {
  server: Server;
  /** `host:port` it listens on (the port may be after the one asked for). */
  address: string;
  close(): Promise<void>;
}

async function tryListen(server: Server, host: string, port: number): Promise<boolean> {
  const outcome = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      resolve(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve(undefined);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
  if (outcome === undefined) return true;
  if (outcome.code === 'EADDRINUSE') return false;
  throw new AgentStartupError(
    `cannot listen on ${formatHostPort(host, port)} for the agent API (web_addr): ${outcome.message}`,
    { cause: outcome },
  );
}

/**
 * Listen on `webAddr` (the next free port when it is taken); undefined when it is `false`. A
 * non-loopback address without `access.credential` is refused; with one, `warn` is told.
 * @example const web = await listenWebAddr(handler, '127.0.0.1:4040', { credential: undefined }, console.warn);
 */
export async function listenWebAddr(
  handler: RequestListener,
  webAddr: string | false | undefined,
  access: WebAccess,
  warn: (line: string) => void,
): Promise<WebListener | undefined> {
  const parsed = parseWebAddr(webAddr);
  if (parsed === false) return undefined;
  if (!isLoopbackHost(parsed.host)) {
    if (access.credential === undefined) {
      throw new AgentStartupError(
        `web_addr ${formatHostPort(parsed.host, parsed.port)} is not a loopback address: anyone who reaches it could read every captured request and start tunnels to this machine. Give a credential with --web-auth user:password (or BURROW_WEB_AUTH), or listen on 127.0.0.1`,
      );
    }
    warn(
      `the agent API listens on ${formatHostPort(parsed.host, parsed.port)}, beyond this machine: every request needs the --web-auth credential; it is plain HTTP, so use it only on a network you trust`,
    );
  }
  if (access.credential !== undefined && !/^[^:]+:.+$/.test(access.credential)) {
    throw new AgentStartupError('--web-auth must be user:password');
  }
  const server = http.createServer(handler);
  const last = parsed.port === 0 ? 0 : Math.min(65535, parsed.port + NEXT_PORTS);
  for (let port = parsed.port; port <= last; port++) {
    if (await tryListen(server, parsed.host, port)) {
      const bound = server.address();
      const actual = typeof bound === 'object' && bound ? bound.port : port;
      return {
        server,
        address: formatHostPort(parsed.host, actual),
        close: () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      };
    }
  }
  throw new AgentStartupError(
    `web_addr ${formatHostPort(parsed.host, parsed.port)} and the ${NEXT_PORTS} ports after it are taken; pass --web-addr with a free port, or false`,
  );
}
