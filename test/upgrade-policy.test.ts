import net from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { connect, type Session } from '../src/sdk/index.js';

/**
 * Issue 27, item 1, as the attack: on an endpoint whose policy denies /admin, an allowed request
 * with `Connection: Upgrade` that the service answers 200 (not 101) used to turn the connection
 * into a raw relay, and a `GET /admin/secret` pipelined behind it reached the service unjudged.
 * A real server, a raw public socket, and both agents: the unmodified @ngrok/ngrok (which used to
 * swallow the pipelined request: the client got no answer for it) and Burrow's SDK (through which
 * the pipelined request used to reach the service).
 */

type Agent = 'ngrok' | 'sdk';
const AGENTS: readonly Agent[] = ['ngrok', 'sdk'];

const DENY_ADMIN = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{type: deny, config: {status_code: 403}}]
`;

/** Send `bytes` on a fresh connection to the HTTP port; read until the edge closes it. */
function exchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.setTimeout(15_000, () => socket.destroy(new Error('no close from the edge')));
    socket.write(bytes, 'latin1');
  });
}

/** The status lines in a run of responses, in order. */
const statusLines = (text: string): string[] =>
  text.match(/HTTP\/1\.1 \d{3} [^\r\n]*(?=\r\n)/g) ?? [];

describe('an upgrade request the agent does not take keeps the connection under HTTP rules', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let sdk: Session;
  const hosts: Record<Agent, string> = { ngrok: '', sdk: '' };
  /** Every request the service received: `METHOD target`. */
  const received: string[] = [];

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    // A plain Node service: no 'upgrade' listener, so it answers upgrade requests as any other.
    service = await startHttpUpstream((req, res) => {
      received.push(`${req.method} ${req.url}`);
      res.end(`public ${req.url}`);
    });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const listener = await session
      .httpEndpoint()
      .trafficPolicy(DENY_ADMIN)
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    hosts.ngrok = new URL(listener.url()!).hostname;
    sdk = await connect({
      serverAddr: `127.0.0.1:${edge.ports.agent}`,
      authtoken: await createAuthtoken(edge.api),
      ca: edge.caFile,
      reconnect: false,
    });
    const endpoint = await sdk.httpEndpoint({ forward: service.port, trafficPolicy: DENY_ADMIN });
    hosts.sdk = new URL(endpoint.url!).hostname;
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await sdk?.close();
    await service?.close();
    await edge?.server.stop(20_000);
    await edge?.db.drop();
  });

  it.each(AGENTS)(
    'judges a request pipelined behind an upgrade answered 200: denied, never at the service (%s)',
    async (agent) => {
      const host = hosts[agent];
      const before = received.length;
      const reply = await exchange(
        edge.ports.http,
        `GET /public HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: anything\r\n\r\n` +
          `GET /admin/secret HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      expect(received.slice(before)).toEqual(['GET /public']);
      expect(statusLines(reply)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 403 Forbidden']);
      expect(reply).toContain('public /public');
      expect(reply).not.toContain('/admin/secret');

      // The inspector recorded the judged request, with the deny's status.
      let traffic: Array<{ path: string; status: number | null }> = [];
      const recorded = (): boolean =>
        traffic.some((r) => r.path === '/admin/secret' && r.status === 403);
      for (let i = 0; i < 200 && !recorded(); i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 50));
        traffic = (await edge.api.get(`/traffic?host=${host}&limit=10`)).body
          .requests as typeof traffic;
      }
      expect(traffic).toContainEqual(
        expect.objectContaining({ path: '/admin/secret', status: 403 }),
      );
    },
  );

  it.each(AGENTS)(
    'judges each later request too: an allowed one reaches the service, a denied one does not (%s)',
    async (agent) => {
      const host = hosts[agent];
      const before = received.length;
      const reply = await exchange(
        edge.ports.http,
        `GET /one HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: anything\r\n\r\n` +
          `GET /two HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: again\r\n\r\n` +
          `GET /admin/x HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
          `GET /three HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      expect(received.slice(before)).toEqual(['GET /one', 'GET /two', 'GET /three']);
      expect(statusLines(reply)).toEqual([
        'HTTP/1.1 200 OK',
        'HTTP/1.1 200 OK',
        'HTTP/1.1 403 Forbidden',
        'HTTP/1.1 200 OK',
      ]);
    },
  );
});
