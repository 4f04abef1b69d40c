import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../src/edge/certificates/certificates.js';
import { BurrowAgentError, connect, type Session } from '../src/sdk/index.js';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  ingressCurl,
  type EdgePorts,
} from './support/edge-listeners.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Traffic policies of agent endpoints on live traffic: a real `burrow server` (API and edge), real
 * agents (@ngrok/ngrok with its `traffic_policy` options, and the Burrow SDK's `trafficPolicy`),
 * curl and raw sockets as the public clients.
 */

const HEADERS_AND_DENY = `
on_http_request:
  - name: no bots
    expressions: ["'x-bot' in req.headers"]
    actions: [{type: deny}]
  - actions: [{type: add-headers, config: {headers: {x-policy-client: "\${conn.client_ip}"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-policy-response: "seen \${res.status_code}"}}}]
`;

const LIMITED = JSON.stringify({
  on_http_request: [
    {
      expressions: ["req.url.path == '/maintenance'"],
      actions: [{ type: 'custom-response', config: { status_code: 503, body: 'back soon' } }],
    },
    {
      actions: [
        {
          type: 'rate-limit',
          config: { capacity: 3, rate: '60s', bucket_key: ['conn.client_ip'] },
        },
      ],
    },
  ],
});

const restrict = (rule: 'allow' | 'deny') =>
  `on_http_request: [{actions: [{type: restrict-ips, config: {${rule}: [127.0.0.1/32]}}]}]`;

describe.each(DATABASE_KINDS)('traffic policies on agent endpoints (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  let web: LocalServer;
  let echo: LocalServer;
  const sessions: Session[] = [];
  const ngrokSessions: ngrok.Session[] = [];

  const token = (): Promise<string> => createAuthtoken(api);
  const sdk = async (): Promise<Session> => {
    const session = await connect({
      serverAddr: `127.0.0.1:${ports.agent}`,
      authtoken: await token(),
      ca: caFile,
      reconnect: false,
    });
    sessions.push(session);
    return session;
  };
  const ngrokSession = async (): Promise<ngrok.Session> => {
    const session = await connectNgrok(ports, readFileSync(caFile), await token());
    ngrokSessions.push(session);
    return session;
  };
  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );
  /** The API's endpoint for a public URL. */
  const endpointOf = async (url: string): Promise<string> => {
    const list = await api.get('/endpoints');
    const found = (list.body.endpoints as Array<{ id: string; url: string }>).find(
      (e) => e.url === url,
    );
    expect(found, `no endpoint for ${url}`).toBeDefined();
    return found!.id;
  };

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    ports = await freeEdgePorts();
    caFile = join(db.dataDir, 'ca.pem');
    server = await startBurrowServer(db, { args: edgeServerArgs(ports) });
    api = new CurlApi(server.url, await createApiKey(db));
    web = await startHttpUpstream((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ url: req.url, headers: req.headers }));
    });
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
  }, 60_000);
  afterAll(async () => {
    await ngrok.disconnect();
    for (const s of ngrokSessions) await s.close().catch(() => undefined);
    for (const s of sessions) await s.close();
    await web?.close();
    await echo?.close();
    await server?.stop();
    await db?.drop();
  });

  it('@ngrok/ngrok forward() with traffic_policy: deny by header, add-headers on request and response', async () => {
    const listener = await ngrok.forward({
      addr: `127.0.0.1:${web.port}`,
      authtoken: await token(),
      server_addr: `127.0.0.1:${ports.agent}`,
      session_ca_cert: readFileSync(caFile, 'utf8'),
      traffic_policy: HEADERS_AND_DENY,
      force_new_session: true,
    });
    const url = listener.url()!;
    const denied = await curlUrl(url, '/x', ['-H', 'X-Bot: yes']);
    expect(denied.status).toBe(403);
    const ok = await curlUrl(url, '/x');
    expect(ok.status).toBe(200);
    expect(ok.body.headers['x-policy-client']).toBe('127.0.0.1');
    expect(ok.body.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(ok.headers['x-policy-response']).toBe('seen 200');

    const events = await api.get(`/endpoints/${await endpointOf(url)}/traffic_policy/events`);
    expect(events.status).toBe(200);
    expect(events.body.events).toEqual([
      expect.objectContaining({ outcome: 'denied', rule: { index: 0, name: 'no bots' } }),
    ]);
    await ngrok.disconnect(url);
  });

  it('restrict-ips through the SDK: 127.0.0.1 denied with 403, allowed with 200', async () => {
    const session = await sdk();
    const denying = await session.httpEndpoint({
      forward: web.port,
      trafficPolicy: restrict('deny'),
    });
    const allowing = await session.httpEndpoint({
      forward: web.port,
      trafficPolicy: restrict('allow'),
    });
    expect((await curlUrl(denying.url!, '/')).status).toBe(403);
    expect((await curlUrl(allowing.url!, '/')).status).toBe(200);
  });

  it('rate-limit answers 429 with Retry-After, and a custom-response answers for the service', async () => {
    const session = await ngrokSession();
    const listener = await session
      .httpEndpoint()
      .trafficPolicy(LIMITED)
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    const url = listener.url()!;
    expect(await curlUrl(url, '/maintenance')).toMatchObject({ status: 503, text: 'back soon' });
    const statuses: number[] = [];
    let last = await curlUrl(url, '/');
    statuses.push(last.status);
    for (let i = 0; i < 3; i++) {
      last = await curlUrl(url, '/');
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);
    await listener.close();
  });

  it('refuses a bad policy at bind time with its code, in both agents', async () => {
    const session = await ngrokSession();
    const err = await session
      .httpEndpoint()
      .trafficPolicy(`on_http_request: [{expressions: ["req.nope"], actions: [{type: deny}]}]`)
      .listen()
      .then(
        () => undefined,
        (e: unknown) => e as { errorCode?: string; message: string },
      );
    expect(err?.errorCode).toBe('ERR_NGROK_2200');
    expect(err?.message).toMatch(/TrafficPolicy: phase on_http_request, rule 0/);

    const ours = await (
      await sdk()
    )
      .tcpEndpoint({ trafficPolicy: 'on_tcp_connect: [{actions: [{type: teleport}]}]' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(ours).toBeInstanceOf(BurrowAgentError);
    expect(ours).toMatchObject({ code: 'ERR_NGROK_2201' });
  });

  it('closes TCP connections that on_tcp_connect denies, before the agent sees them', async () => {
    const session = await ngrokSession();
    const denied = await session
      .tcpEndpoint()
      .trafficPolicy(
        'on_tcp_connect: [{expressions: ["conn.client_ip == \'127.0.0.1\'"], actions: [{type: deny}]}]',
      )
      .listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const open = await (
      await sdk()
    ).tcpEndpoint({
      forward: echo.port,
      trafficPolicy:
        'on_tcp_connect: [{expressions: ["conn.client_ip == \'192.0.2.1\'"], actions: [{type: deny}]}]',
    });
    const roundTrip = async (url: string): Promise<string> => {
      const socket = net.connect({ port: Number(new URL(url).port), host: '127.0.0.1' });
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', () => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.end('ping');
      await closed;
      return Buffer.concat(chunks).toString();
    };
    expect(await roundTrip(denied.url()!)).toBe('');
    expect(await roundTrip(open.url!)).toBe('ping');
    await denied.close();
  });

  it('runs the TLS sample on a TLS endpoint: a TLS 1.3 client is denied, TLS 1.2 passes', async () => {
    const session = await sdk();
    const endpoint = await session.tlsEndpoint({
      trafficPolicy: {
        on_tcp_connect: [
          {
            name: 'AllowTLS1.3',
            expressions: ["conn.tls.version.contains('1.3')"],
            actions: [
              { type: 'log', config: { metadata: { message: 'Invalid TLS Version' } } },
              { type: 'deny' },
            ],
          },
        ],
      },
    });
    const name = new URL(endpoint.url!).hostname;
    const leaf = await (await LocalCa.loadOrCreate(db.dataDir)).issue([name]);
    const local = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) =>
      s.end(`hello over ${s.getProtocol()}`),
    );
    local.listen(0, '127.0.0.1');
    await once(local, 'listening');
    endpoint.forward((local.address() as net.AddressInfo).port);
    const dial = (maxVersion: tls.SecureVersion): Promise<string> =>
      new Promise((resolve) => {
        const socket = tls.connect({
          port: ports.https,
          host: '127.0.0.1',
          servername: name,
          ca: readFileSync(caFile),
          maxVersion,
        });
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (c: string) => (text += c));
        socket.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code ?? e.message}`));
        socket.on('close', () => resolve(text));
      });
    expect(await dial('TLSv1.3')).toMatch(/^error /);
    expect(await dial('TLSv1.2')).toBe('hello over TLSv1.2');
    const events = await api.get(
      `/endpoints/${await endpointOf(endpoint.url!)}/traffic_policy/events`,
    );
    expect(events.body.events.map((e: { outcome: string }) => e.outcome)).toEqual([
      'denied',
      'log',
    ]);
    expect(events.body.events[1].message).toBe('Invalid TLS Version');
    local.close();
  });
});
