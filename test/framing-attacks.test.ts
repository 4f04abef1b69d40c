import http from 'node:http';
import type { Duplex } from 'node:stream';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Session } from '../src/sdk/index.js';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { listenLocal, rawExchange, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Nothing a template renders can break the framing (issue 27 item 7), as an attacker tries it on
 * a real `burrow server`, through the Burrow SDK and the unmodified @ngrok/ngrok as agents:
 * query parameters with `%0d%0a` interpolated into a url-rewrite's target, a custom-response's or
 * add-headers' header, a redirect's location, and an agent's reason phrase. The edge refuses
 * each (400 on the request side, 502 with the error page on the response side) and writes none.
 * docs/security.md, "Nothing a template renders can break the framing".
 */

/** A smuggled request, as a query parameter's encoded value. */
const SMUGGLE =
  '1%20HTTP/1.1%0d%0aX-Injected:%20yes%0d%0a%0d%0aGET%20/smuggled%20HTTP/1.1%0d%0aHost:%20x%0d%0a%0d%0a';
const SET_COOKIE = 'x%0d%0aSet-Cookie:%20injected=1';

const REWRITE_FROM_QUERY = `
on_http_request:
  - actions:
      - type: url-rewrite
        config: {from: "/up\\\\?.*$", to: "/x?q=\${req.url.query_params['a'][0]}"}
`;
const HEADER_FROM_QUERY = `
on_http_request:
  - actions:
      - type: custom-response
        config: {status_code: 200, headers: {x-note: "\${req.url.query_params['a'][0]}"}, body: hi}
`;
const REDIRECT_FROM_QUERY = `
on_http_request:
  - actions:
      - type: redirect
        config: {to: "https://example.com/\${req.url.query_params['a'][0]}"}
`;
const ADDED_FROM_QUERY = (phase: string): string => `
${phase}:
  - actions:
      - type: add-headers
        config: {headers: {x-note: "\${req.url.query_params['a'][0]}"}}
`;

/** The head of a response (through its empty line). */
const headOf = (reply: string): string => reply.slice(0, reply.indexOf('\r\n\r\n') + 2);

describe('templates cannot break the framing of what the edge writes', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let oddReason: LocalServer;
  let ngrokSession: ngrok.Session;
  let sdk: Session;
  /** Every request line the service received: plain requests and upgrades. */
  const received: string[] = [];

  /** An endpoint's Host with `policy`, through `agent`, forwarding to the recording service. */
  const endpoint = async (agent: 'sdk' | 'ngrok', policy?: string, port = service.port) => {
    if (agent === 'sdk') {
      const ep = await sdk.httpEndpoint({ forward: port, trafficPolicy: policy });
      return new URL(ep.url!).hostname;
    }
    let builder = ngrokSession.httpEndpoint();
    if (policy) builder = builder.trafficPolicy(policy);
    const listener = await builder.listenAndForward(`http://127.0.0.1:${port}`);
    return new URL(listener.url()!).hostname;
  };
  const send = (host: string, target: string, extra = ''): Promise<string> =>
    rawExchange(
      edge.ports.http,
      `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`,
    );
  const UPGRADE = 'Connection: Upgrade\r\nUpgrade: websocket\r\n';
  const sendUpgrade = (host: string, target: string): Promise<string> =>
    rawExchange(edge.ports.http, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${UPGRADE}\r\n`);

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    const recording = http.createServer((req, res) => {
      received.push(`${req.method} ${req.url}`);
      res.end('ok');
    });
    recording.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
      received.push(`upgrade ${req.method} ${req.url}`);
      socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
    });
    service = await listenLocal(recording);
    oddReason = await startTcpUpstream((socket) => {
      socket.once('data', () =>
        socket.end('HTTP/1.1 200 O\u0001K\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'),
      );
    });
    ngrokSession = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    sdk = await connect({
      serverAddr: `127.0.0.1:${edge.ports.agent}`,
      authtoken: await createAuthtoken(edge.api),
      ca: edge.caFile,
      reconnect: false,
    });
  }, 60_000);
  afterAll(async () => {
    await ngrokSession?.close().catch(() => undefined);
    await sdk?.close();
    await service?.close();
    await oddReason?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  it.each(['sdk', 'ngrok'] as const)(
    'a url-rewrite interpolating CR LF cannot deliver a second request on an upgrade (%s)',
    async (agent) => {
      const host = await endpoint(agent, REWRITE_FROM_QUERY);
      const before = received.length;
      const reply = await sendUpgrade(host, `/up?a=${SMUGGLE}`);
      const plain = await send(host, `/up?a=${SMUGGLE}`);
      expect(received.slice(before), 'the service got requests').toEqual([]);
      expect(reply).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(reply).toContain('ERR_BURROW_UNSAFE_REQUEST_HEAD');
      expect(plain).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      // The same rule with a harmless value still rewrites.
      expect(await send(host, '/up?a=fine')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(received.slice(before)).toEqual(['GET /x?q=fine']);
    },
  );

  it.each(['sdk', 'ngrok'] as const)(
    'a custom-response header built from a query parameter cannot set a cookie (%s)',
    async (agent) => {
      const host = await endpoint(agent, HEADER_FROM_QUERY);
      const plain = await send(host, `/?a=${SET_COOKIE}`);
      expect(headOf(plain)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
      expect(headOf(plain)).not.toMatch(/set-cookie/i);
      expect(plain).toContain('ERR_BURROW_UNSAFE_RESPONSE_HEAD');
      // On an upgrade the answer is written raw onto the socket: held to the same rule.
      const upgrade = await sendUpgrade(host, `/?a=${SET_COOKIE}`);
      expect(headOf(upgrade)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
      expect(headOf(upgrade)).not.toMatch(/set-cookie/i);
      expect(headOf(await send(host, '/?a=fine'))).toMatch(
        /^HTTP\/1\.1 200 OK\r\n.*x-note: fine/is,
      );
    },
  );

  it('a redirect location or an added header with a control character is refused, not cleaned', async () => {
    const before = received.length;
    const redirect = await endpoint('ngrok', REDIRECT_FROM_QUERY);
    expect(headOf(await send(redirect, `/?a=${SET_COOKIE}`))).toMatch(
      /^HTTP\/1\.1 502 Bad Gateway\r\n/,
    );
    expect(headOf(await send(redirect, '/?a=fine'))).toMatch(
      /^HTTP\/1\.1 302 Found\r\n.*location: https:\/\/example\.com\/fine/is,
    );
    const onRequest = await endpoint('ngrok', ADDED_FROM_QUERY('on_http_request'));
    expect(await send(onRequest, `/?a=${SET_COOKIE}`)).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(received.slice(before)).toEqual([]);
    const onResponse = await endpoint('ngrok', ADDED_FROM_QUERY('on_http_response'));
    const reply = await send(onResponse, `/?a=${SET_COOKIE}`);
    expect(headOf(reply)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(headOf(reply)).not.toMatch(/set-cookie/i);
  });

  it("an agent's reason phrase with a control character is not relayed", async () => {
    const lean = await endpoint('sdk', undefined, oddReason.port);
    const leanReply = await send(lean, '/');
    expect(headOf(leanReply)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(leanReply).not.toContain('\u0001');
    const judged = await endpoint('sdk', ADDED_FROM_QUERY('on_http_request'), oddReason.port);
    const fullReply = await send(judged, '/?a=1');
    expect(headOf(fullReply)).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(fullReply).not.toContain('\u0001');
  });
});
