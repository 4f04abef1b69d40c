/**
 * A `burrow server --role all` with its edge listeners on free loopback ports, as the end-to-end
 * tests start it, and the pieces every such test needs: authtokens from the API and curl at the
 * ingress port that serves a public URL.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { expect } from 'vitest';
import { createTestDatabase, type TestDatabase } from './stores.js';
import { curl, CurlApi, type CurlReply } from './curl.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
  type StartOptions,
} from './server-process.js';

/** The agent listener and the HTTP and HTTPS ingress ports. */
export interface EdgePorts {
  agent: number;
  http: number;
  https: number;
}

/**
 * Three free loopback ports for the edge listeners.
 * @example ports = await freeEdgePorts();
 */
export async function freeEdgePorts(): Promise<EdgePorts> {
  return { agent: await freePort(), http: await freePort(), https: await freePort() };
}

/**
 * `burrow server` arguments for the API and the edge in one process, listening on `ports`.
 * @example await startBurrowServer(db, { args: edgeServerArgs(ports) });
 */
export function edgeServerArgs(ports: EdgePorts): string[] {
  return [
    ...['--role', 'all', '--agent-listen', `127.0.0.1:${ports.agent}`],
    ...['--http-listen', `127.0.0.1:${ports.http}`],
    ...['--https-listen', `127.0.0.1:${ports.https}`],
  ];
}

/** A `burrow server --role all` on a fresh database, and what a test reaches it with. */
export interface EdgeServer {
  db: TestDatabase;
  ports: EdgePorts;
  server: BurrowServer;
  /** The API, with a fresh API key. */
  api: CurlApi;
  /** The server's CA certificate: its file in the data folder, and the PEM in it. */
  caFile: string;
  caPem: string;
}

/**
 * Create a database of `kind` and start a server on it with its edge listeners on free ports
 * (`extraArgs` after `edgeServerArgs`), with an API key; the test stops the server and drops `db`.
 * @example ({ db, ports, server, api, caFile, caPem } = await startEdgeServer('sqlite'));
 */
export async function startEdgeServer(
  kind: TestDatabase['name'],
  extraArgs: string[] = [],
  options: Pick<StartOptions, 'openFilesLimit' | 'nodeFlags'> = {},
): Promise<EdgeServer> {
  const db = await createTestDatabase(kind);
  // A port free a moment ago may be taken by another test process before the server binds it:
  // then start again on fresh ports (startBurrowServer retries only the API's).
  let ports = await freeEdgePorts();
  let server: Awaited<ReturnType<typeof startBurrowServer>> | undefined;
  for (let attempt = 1; !server; attempt++) {
    try {
      server = await startBurrowServer(db, {
        ...options,
        args: [...edgeServerArgs(ports), ...extraArgs],
      });
    } catch (err) {
      if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
      ports = await freeEdgePorts();
    }
  }
  const api = new CurlApi(server.url, await createApiKey(db));
  const caFile = join(db.dataDir, 'ca.pem');
  return { db, ports, server, api, caFile, caPem: readFileSync(caFile, 'utf8') };
}

/**
 * A new authtoken (credential) from the API, asserting it was created.
 * @example const token = await createAuthtoken(api, { description: 'edge agent' });
 */
export async function createAuthtoken(api: CurlApi, body: object = {}): Promise<string> {
  const res = await api.post('/credentials', body);
  expect(res.status, res.text).toBe(201);
  return res.body.token as string;
}

/**
 * curl for public URLs: each request goes to the ingress port that serves the URL's scheme,
 * trusting the server's CA at `caFile`. `ports` is read when curl runs, so a test may assign it
 * later (in beforeAll).
 * @example const curlUrl = ingressCurl(() => ports, () => caFile); await curlUrl(url, '/hi');
 */
export function ingressCurl(
  ports: () => EdgePorts,
  caFile: () => string,
): (url: string, path?: string, extra?: string[]) => Promise<CurlReply> {
  return (url, path = '/', extra = []) => {
    const { hostname, port, protocol } = new URL(url);
    const secure = protocol === 'https:';
    const where = `${hostname}:${port || (secure ? 443 : 80)}`;
    return curl([
      `${url}${path}`,
      '--cacert',
      caFile(),
      '--connect-to',
      `${where}:127.0.0.1:${secure ? ports().https : ports().http}`,
      ...extra,
    ]);
  };
}

/** What `hostGet` got, with whether it reused a keep-alive connection and how long it took. */
export interface HostReply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
  reused: boolean;
  ms: number;
}

/**
 * One GET on 127.0.0.1:`port` with a Host header, through `agent` (`false`: a connection of its
 * own), failing after 10 s.
 * @example const res = await hostGet(ports.http, 'app.example.com', '/', keepAlive);
 */
export function hostGet(
  port: number,
  host: string,
  path: string,
  agent: http.Agent | false = false,
): Promise<HostReply> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, headers: { Host: host }, agent },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            headers: res.headers,
            reused: req.reusedSocket,
            ms: Date.now() - started,
          }),
        );
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}
