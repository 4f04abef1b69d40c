/**
 * A `burrow server --role all` with its edge listeners on free loopback ports, as the end-to-end
 * tests start it, and the pieces every such test needs: authtokens from the API and curl at the
 * ingress port that serves a public URL.
 */
import { expect } from 'vitest';
import { curl, type CurlApi, type CurlReply } from './curl.js';
import { freePort } from './server-process.js';

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
