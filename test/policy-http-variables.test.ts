import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Issue 31: the variables of ngrok's HTTP and TCP references that came last
 * (`req.content_type.raw` / `.parameters`, `res.content_type.*`, `req.ts.body_received`, `req.trailers`,
 * `res.cookies`, `req.user_agent` with ngrok's field names, `req.url.uri`, `conn.ts.start` on a TCP endpoint)
 * and http-request's `retry_condition`, on live traffic
 * through a real `burrow server` and the unmodified @ngrok/ngrok agent.
 */

/** One rule per path, so one endpoint serves every case. */
const at = (path: string, rule: Record<string, unknown>) => ({
  ...rule,
  expressions: [`req.url.path == '${path}'`, ...((rule.expressions as string[]) ?? [])],
});

const httpPolicy = (checker: string) =>
  JSON.stringify({
    on_http_request: [
      // http-request with ngrok's retry_condition example: the checker answers 500 twice.
      at('/retry', {
        actions: [
          {
            type: 'http-request',
            config: {
              url: `${checker}/flaky`,
              retry_condition: 'last_attempt.res.statusCode == 500',
            },
          },
          {
            type: 'custom-response',
            config: {
              body: '${actions.ngrok.http_request.res.status_code} ${size(actions.ngrok.http_request.attempts)} ${actions.ngrok.http_request.res.body}',
            },
          },
        ],
      }),
      // ngrok's examples for req.content_type and req.content_type.parameters.
      at('/ct', {
        expressions: [
          "req.content_type == 'application/json'",
          "req.content_type.parameters['charset'] == 'utf-8'",
        ],
        actions: [
          {
            type: 'custom-response',
            config: { body: '${req.content_type}|${req.content_type.raw}' },
          },
        ],
      }),
      // ngrok's example for req.ts.body_received; the body still reaches the service whole.
      at('/body', {
        expressions: [
          "req.ts.body_received > timestamp('2023-12-31T00:00:00Z')",
          'req.ts.body_received >= req.ts.header_received',
        ],
        actions: [{ type: 'add-headers', config: { headers: { 'x-body-received': 'yes' } } }],
      }),
      // ngrok's user agent fields, and req.url.uri.
      at('/ua', {
        expressions: ['req.user_agent.is_mobile', "req.user_agent.os == 'iOS'"],
        actions: [
          {
            type: 'custom-response',
            config: { body: '${req.user_agent.device} ${req.url.uri}' },
          },
        ],
      }),
      // ngrok's example for req.trailers.
      at('/trailers', {
        expressions: ["'Fizz' in req.trailers['baz']"],
        actions: [
          { type: 'custom-response', config: { body: "trailer ${req.trailers['baz'][0]}" } },
        ],
      }),
      at('/nobody', {
        expressions: ["req.ts.body_received == timestamp('1970-01-01T00:00:00Z')"],
        actions: [{ type: 'custom-response', config: { body: 'no body' } }],
      }),
    ],
    on_http_response: [
      at('/cookie', {
        expressions: [
          "res.cookies['sid'][0].http_only",
          "res.cookies['sid'][0].max_age == duration('60s')",
        ],
        actions: [
          {
            type: 'add-headers',
            config: {
              headers: {
                'x-cookie': "${res.cookies['sid'][0].value} ${res.cookies['sid'][0].path}",
              },
            },
          },
        ],
      }),
      at('/res', {
        expressions: [
          "res.content_type == 'text/plain'",
          "res.content_type.parameters['charset'] == 'utf-8'",
        ],
        actions: [
          { type: 'add-headers', config: { headers: { 'x-res-type': '${res.content_type.raw}' } } },
        ],
      }),
    ],
  });

describe('HTTP and TCP variables of ngrok reference on live traffic (@ngrok/ngrok)', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let echo: LocalServer;
  let checker: LocalServer;
  let session: ngrok.Session;
  let url: string;

  beforeAll(async () => {
    // The checking service listens on loopback: allowed as an operator would.
    edge = await startEdgeServer('sqlite', ['--egress-allow', '127.0.0.1']);
    let calls = 0;
    checker = await startHttpUpstream((_req, res) => {
      calls++;
      res.statusCode = calls <= 2 ? 500 : 200;
      res.end(calls <= 2 ? 'busy' : 'ok');
    });
    web = await startHttpUpstream((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.setHeader('content-type', 'text/plain; charset=utf-8');
        if (req.url === '/cookie')
          res.setHeader('set-cookie', ['sid=s1; Path=/app; Max-Age=60; HttpOnly']);
        const mark = req.headers['x-body-received'] ?? '-';
        res.end(`upstream ${req.url} ${String(mark)} ${Buffer.concat(chunks).toString()}`);
      });
    });
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const listener = await session
      .httpEndpoint()
      .trafficPolicy(httpPolicy(`http://127.0.0.1:${checker.port}`))
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    url = listener.url()!;
  }, 90_000);

  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await web?.close();
    await echo?.close();
    await checker?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  it('req.content_type is the media type, with .raw and .parameters', async () => {
    const reply = await curlUrl(url, '/ct', [
      ...['-H', 'Content-Type: application/json; charset=utf-8', '--data', '{}'],
    ]);
    expect([reply.status, reply.text]).toEqual([
      200,
      'application/json|application/json; charset=utf-8',
    ]);
    const other = await curlUrl(url, '/ct', ['-H', 'Content-Type: application/json', '-d', '{}']);
    expect(other.text).toBe('upstream /ct - {}');
  });

  it('req.user_agent with ngrok field names, and req.url.uri', async () => {
    const iphone =
      'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1';
    expect((await curlUrl(url, '/ua?x=1', ['-A', iphone])).text).toBe('iPhone /ua?x=1');
    expect((await curlUrl(url, '/ua?x=1', ['-A', 'curl/8'])).text).toBe('upstream /ua?x=1 - ');
  });

  it('res.content_type and its parameters, read from the service', async () => {
    const reply = await curlUrl(url, '/res');
    expect(reply.headers['x-res-type']).toBe('text/plain; charset=utf-8');
  });

  it('res.cookies with their attributes, read from the Set-Cookie headers of the service', async () => {
    expect((await curlUrl(url, '/cookie')).headers['x-cookie']).toBe('s1 /app');
  });

  it('req.ts.body_received: the edge reads the body first, then sends it on whole', async () => {
    const body = 'x'.repeat(100_000);
    const reply = await curlUrl(url, '/body', ['--data-binary', body]);
    expect([reply.status, reply.text]).toEqual([200, `upstream /body yes ${body}`]);
    expect((await curlUrl(url, '/nobody')).text).toBe('no body');
  });

  it("http-request retries while ngrok's retry_condition says so", async () => {
    const reply = await curlUrl(url, '/retry');
    expect([reply.status, reply.text]).toEqual([200, '200 3 ok']);
  });

  it('req.trailers: the trailers a chunked body ends with', async () => {
    const { hostname } = new URL(url);
    const text = await new Promise<string>((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: edge.ports.https,
          servername: hostname,
          ca: edge.caPem,
          path: '/trailers',
          method: 'POST',
          headers: { host: hostname, trailer: 'baz' },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve(body));
        },
      );
      req.on('error', reject);
      req.write('some data');
      req.addTrailers({ baz: 'Fizz' });
      req.end();
    });
    expect(text).toBe('trailer Fizz');
    // Without them the rule does not match, and the request goes on.
    expect((await curlUrl(url, '/trailers', ['--data', 'x'])).text).toBe('upstream /trailers - x');
  });

  it('conn.ts.start on a TCP endpoint (a guard rule that fails closed if it could not read it)', async () => {
    const listener = await session
      .tcpEndpoint()
      .trafficPolicy(
        JSON.stringify({
          on_tcp_connect: [
            {
              expressions: [
                "!(conn.ts.start > timestamp('2023-12-31T00:00:00Z') && conn.ts.start <= time.now)",
              ],
              actions: [{ type: 'close-connection' }],
            },
          ],
        }),
      )
      .listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const socket = net.connect({ port: Number(new URL(listener.url()!).port), host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.end('ping');
    await closed;
    expect(Buffer.concat(chunks).toString()).toBe('ping');
    await listener.close();
  });

  it('conn.ts.start on a TLS endpoint, as a log event records it', async () => {
    const listener = await session
      .tlsEndpoint()
      .trafficPolicy(
        JSON.stringify({
          on_tcp_connect: [
            {
              expressions: ["conn.ts.start > timestamp('2023-12-31T00:00:00Z')"],
              actions: [
                { type: 'log', config: { metadata: { year: '${conn.ts.start.getFullYear()}' } } },
              ],
            },
          ],
        }),
      )
      .listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const endpoint = listener.url()!;
    // The handshake goes nowhere (the service echoes), but the edge ran on_tcp_connect first.
    await new Promise<void>((resolve) => {
      const socket = tls.connect({
        port: edge.ports.https,
        host: '127.0.0.1',
        servername: new URL(endpoint).hostname,
        rejectUnauthorized: false,
      });
      socket.on('error', () => resolve());
      socket.on('close', () => resolve());
      socket.setTimeout(5000, () => socket.destroy());
    });
    const list = await edge.api.get('/endpoints');
    const id = (list.body.endpoints as Array<{ id: string; url: string }>).find(
      (e) => e.url === endpoint,
    )?.id;
    const events = await edge.api.get(`/endpoints/${id}/traffic_policy/events`);
    expect(events.body.events).toEqual([
      expect.objectContaining({
        outcome: 'log',
        metadata: { year: String(new Date().getUTCFullYear()) },
      }),
    ]);
    await listener.close();
  });
});
