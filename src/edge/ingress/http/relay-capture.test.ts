/**
 * The traffic inspector's body capture on the lean relay (exchange.ts ExchangeBodies): the
 * request body as the client sent it and the response body as the agent sent it, both without
 * their HTTP/1.1 framing, on both wires; over real sockets, with a service behind a fake tunnel.
 * The relay passes the service's head on as it came (this service sends no `Date`).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  httpRequest,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { until } from '../../../../test/support/mux.js';
import { TrafficLog, type TrafficRecord } from '../../metrics/traffic-log.js';
import { trafficExchangeTap } from './traffic-tap.js';

const log = new TrafficLog();
let t: TestIngress;
let endpoints: PolicyEndpoints;
/** Answers `you sent: <body>` in two chunks (chunked), without a Date header. */
let service: LocalServer;
/** The same answer over h2c, for an endpoint bound with app protocol `http2` (h2-call.ts). */
let h2Service: Http2Server;

beforeAll(async () => {
  t = await startTestIngress({
    exchangeTap: trafficExchangeTap(log),
  });
  endpoints = policyEndpoints(t.registry);
  service = await startHttpUpstream((req: IncomingMessage, res: ServerResponse) => {
    res.sendDate = false;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('you sent: ');
      res.end(Buffer.concat(chunks));
    });
  });
  h2Service = http2.createServer();
  h2Service.on('stream', (stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      stream.respond({ ':status': 200 });
      stream.write('you sent: ');
      stream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => h2Service.listen(0, '127.0.0.1', resolve));
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await service.close();
  h2Service.close();
});

/** The log's record of the last request to `host`, once answered. */
async function recordOf(host: string): Promise<TrafficRecord> {
  let record: TrafficRecord | undefined;
  await until(() => {
    record = log.list({ host, limit: 1 })[0];
    return record?.status !== undefined;
  });
  return record!;
}

/** POST `body` over HTTP/1.1, with a Content-Length or chunked; the answer's headers and body. */
function post1(host: string, body: string, chunked: boolean) {
  return new Promise<{ headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request(
      { port: t.httpPort, host: '127.0.0.1', method: 'POST', path: '/in', headers: { host } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    if (!chunked) req.setHeader('Content-Length', Buffer.byteLength(body));
    // Two writes: a chunked body goes as two chunks.
    req.write(body.slice(0, 3));
    req.end(body.slice(3));
  });
}

/** POST `parts` to `host` over HTTP/2 with capture on; both bodies must be in its record. */
async function captureOverH2(host: string, parts: [string, string]): Promise<void> {
  log.setCapture(host, true);
  const session = http2.connect(`https://127.0.0.1:${t.httpsPort}`, {
    ca: t.ca.certPem,
    servername: host,
  });
  try {
    const reply = await new Promise<string>((resolve, reject) => {
      const stream = session.request({ ':method': 'POST', ':path': '/in', ':authority': host });
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (d: string) => (body += d));
      stream.on('end', () => resolve(body));
      stream.on('error', reject);
      // Two writes: two DATA frames.
      stream.write(parts[0]);
      stream.end(parts[1]);
    });
    const sent = parts.join('');
    expect(reply).toBe(`you sent: ${sent}`);
    const record = await recordOf(host);
    expect(record.requestBody?.bytes.toString()).toBe(sent);
    expect(record.responseBody?.bytes.toString()).toBe(`you sent: ${sent}`);
  } finally {
    session.close();
  }
}

describe('body capture on the lean relay', () => {
  it('captures both bodies of HTTP/1.1 exchanges, framed by length or chunked', async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    log.setCapture(host, true);
    for (const chunked of [false, true]) {
      const body = chunked ? 'chunked body' : 'sized body';
      const reply = await post1(host, body, chunked);
      expect(reply.body).toBe(`you sent: ${body}`);
      // The relay served it: Node's server would have added a Date.
      expect(reply.headers.date).toBeUndefined();
      const record = await recordOf(host);
      expect(record.requestBody?.bytes.toString()).toBe(body);
      expect(record.responseBody?.bytes.toString()).toBe(`you sent: ${body}`);
      expect(record.responseBody?.truncated).toBe(false);
    }
    log.setCapture(host, false);
    await post1(host, 'not kept', false);
    const record = await recordOf(host);
    expect([record.requestBody, record.responseBody]).toEqual([undefined, undefined]);
  });

  it("keeps the service's body when a policy rewrites what the client gets", async () => {
    const policy = `
on_http_response:
  - actions: [{type: response-body-find-replace, config: {replacements: [{from: "sent", to: "SENT"}]}}]
`;
    const host = endpoints.publicEndpoint('http', service.port, policy).hostname!;
    log.setCapture(host, true);
    const reply = await post1(host, 'abcdef', true);
    expect(reply.body).toBe('you SENT: abcdef');
    expect(reply.headers.date).toBeUndefined();
    const record = await recordOf(host);
    expect(record.requestBody?.bytes.toString()).toBe('abcdef');
    expect(record.responseBody?.bytes.toString()).toBe('you sent: abcdef');
  });

  it("keeps the body of an answer the edge wrote in place of the service's, on both wires", async () => {
    const policy = `
on_http_request:
  - expressions: ["req.url.path == '/deny'"]
    actions: [{type: custom-response, config: {status_code: 403, body: "not for you"}}]
on_http_response:
  - expressions: ["req.url.path == '/swap'"]
    actions: [{type: custom-response, config: {status_code: 503, body: "swapped"}}]
`;
    const host = endpoints.publicEndpoint('http', service.port, policy).hostname!;
    log.setCapture(host, true);
    for (const [path, status, body] of [
      ['/deny', 403, 'not for you'],
      ['/swap', 503, 'swapped'],
    ] as const) {
      const reply = await httpRequest(t.httpPort, { host, path });
      expect([reply.status, reply.body]).toEqual([status, body]);
      expect((await recordOf(host)).responseBody?.bytes.toString()).toBe(body);
    }
    const session = http2.connect(`https://127.0.0.1:${t.httpsPort}`, {
      ca: t.ca.certPem,
      servername: host,
    });
    try {
      for (const [path, body] of [
        ['/deny', 'not for you'],
        ['/swap', 'swapped'],
      ] as const) {
        await new Promise<void>((resolve, reject) => {
          const stream = session.request({ ':path': path, ':authority': host });
          stream.resume();
          stream.on('end', resolve);
          stream.on('error', reject);
        });
        expect((await recordOf(host)).responseBody?.bytes.toString()).toBe(body);
      }
    } finally {
      session.close();
    }
  });

  it('captures both bodies of an HTTP/2 exchange', async () => {
    const host = endpoints.publicEndpoint('http', service.port).hostname!;
    await captureOverH2(host, ['over ', 'h2']);
  });

  it('captures both bodies of an HTTP/2 call to an http2 endpoint', async () => {
    const port = (h2Service.address() as AddressInfo).port;
    const tunnel = endpoints.publicEndpoint('http', port);
    Object.assign(tunnel, { appProtocol: 'http2' });
    await captureOverH2(tunnel.hostname!, ['a call ', 'streamed']);
  });
});
