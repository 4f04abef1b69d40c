/**
 * HTTP/2 calls on the relay's pipeline to an endpoint bound with app protocol `http2`
 * (h2-call.ts), over real sockets: Node's http2 client against the ingress's HTTPS listener, an
 * h2c service behind a fake tunnel. gRPC's shapes without gRPC's library: a status in trailers,
 * a trailers-only answer, a streamed upload and download with back-pressure, resets both ways,
 * the policy's answers as gRPC statuses. `test/grpc-tunnels.test.ts` runs real gRPC through
 * `@ngrok/ngrok`.
 */
import http2, {
  constants,
  type ClientHttp2Session,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  metricValue,
  startTestIngress,
  type FakeTunnel,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { endpointLabel } from '../../metrics/endpoint-meters.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { until } from '../../../../test/support/mux.js';

const POLICY = `
on_http_request:
  - expressions: ["req.url.path == '/deny'"]
    actions: [{type: deny, config: {status_code: 403}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-served-by: burrow}}}]
`;

let t: TestIngress;
let endpoints: PolicyEndpoints;
let service: Http2Server;
/** How each service stream ended: its rstCode once closed. */
const closed: Array<{ path: string; code: number; aborted: boolean }> = [];

/**
 * `/unary` answers a status in trailers; `/status-only` a trailers-only answer; `/upload` the
 * byte count of the body; `/download` 8 MiB; `/hang` nothing; `/reset` headers, then a reset.
 */
function serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  const path = String(headers[':path']);
  stream.on('close', () => closed.push({ path, code: stream.rstCode, aborted: stream.aborted }));
  stream.on('error', () => undefined);
  if (path === '/hang') return;
  if (path === '/status-only') {
    stream.respond(
      { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5' },
      {
        endStream: true,
      },
    );
    return;
  }
  if (path === '/reset') {
    stream.respond({ ':status': 200 });
    stream.write('partial');
    // destroy() resets at once (close() would end the data first, then reset a closed stream).
    setTimeout(() => stream.destroy(new Error('the service broke')), 20);
    return;
  }
  if (path === '/download') {
    stream.respond({ ':status': 200 });
    const piece = Buffer.alloc(64 * 1024, 0x61);
    let left = 128;
    const more = (): void => {
      while (left > 0) {
        left--;
        if (!stream.write(piece)) {
          stream.once('drain', more);
          return;
        }
      }
      stream.end();
    };
    more();
    return;
  }
  let size = 0;
  stream.on('data', (c: Buffer) => (size += c.length));
  stream.on('end', () => {
    stream.respond(
      {
        ':status': 200,
        'content-type': 'application/grpc',
        'x-forwarded-seen': String(headers['x-forwarded-proto']),
      },
      { waitForTrailers: true },
    );
    stream.once('wantTrailers', () =>
      stream.sendTrailers({ 'grpc-status': '0', 'x-size': String(size) }),
    );
    stream.end(`got ${size}`);
  });
}

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  service = http2.createServer();
  service.on('stream', serve);
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await t.close();
  service.close();
});

const tunnels = new Map<string, FakeTunnel>();
const tunnelOf = (host: string): FakeTunnel => tunnels.get(host)!;

function h2Endpoint(policy?: string): string {
  const port = (service.address() as AddressInfo).port;
  const tunnel = endpoints.publicEndpoint('http', port, policy);
  Object.assign(tunnel, { appProtocol: 'http2' });
  tunnels.set(tunnel.hostname!, tunnel);
  return tunnel.hostname!;
}

interface Reply {
  headers: IncomingHttpHeaders;
  body: string;
  trailers: IncomingHttpHeaders;
  code: number;
}

function call(
  session: ClientHttp2Session,
  host: string,
  path: string,
  body?: Buffer,
  contentType = 'application/grpc',
): Promise<Reply> {
  return new Promise((resolve) => {
    const stream = session.request(
      { ':method': 'POST', ':path': path, ':authority': host, 'content-type': contentType },
      { endStream: body === undefined },
    );
    const reply: Reply = { headers: {}, body: '', trailers: {}, code: 0 };
    stream.on('response', (h) => (reply.headers = h));
    stream.on('trailers', (h) => (reply.trailers = h));
    stream.on(
      'data',
      (d: Buffer) => (reply.body += d.length > 64 ? `[${d.length}]` : d.toString()),
    );
    stream.on('error', () => undefined);
    stream.on('close', () => resolve({ ...reply, code: stream.rstCode }));
    if (body) stream.end(body);
  });
}

const connect = (host: string): ClientHttp2Session =>
  http2.connect(`https://127.0.0.1:${t.httpsPort}`, { ca: t.ca.certPem, servername: host });

describe('HTTP/2 calls to an http2 service on the relay (h2-call.ts)', () => {
  it('relays a call with its status in trailers, the policy’s header, and a trailers-only answer', async () => {
    const host = h2Endpoint(POLICY);
    const session = connect(host);
    try {
      const unary = await call(session, host, '/unary', Buffer.from('ping'));
      expect(unary.headers[':status']).toBe(200);
      expect(unary.headers['x-served-by']).toBe('burrow');
      expect(unary.headers['x-forwarded-seen']).toBe('https');
      expect(unary.body).toBe('got 4');
      expect(unary.trailers).toMatchObject({ 'grpc-status': '0', 'x-size': '4' });
      const only = await call(session, host, '/status-only');
      expect([only.headers[':status'], only.headers['grpc-status'], only.body]).toEqual([
        200,
        '5',
        '',
      ]);
      const requests = metricValue(t.metrics, 'burrow_http_requests_total', {
        endpoint: endpointLabel(tunnelOf(host)),
        code: '200',
      });
      expect(requests).toBe(2);
    } finally {
      session.close();
    }
  });

  it('streams a 1 MiB upload and an 8 MiB download with back-pressure', async () => {
    const host = h2Endpoint();
    const session = connect(host);
    try {
      const [up, down] = await Promise.all([
        call(session, host, '/upload', Buffer.alloc(1024 * 1024, 0x62)),
        call(session, host, '/download'),
      ]);
      expect(up.body).toBe(`got ${1024 * 1024}`);
      const sizes = [...down.body.matchAll(/\[(\d+)\]/g)].reduce((n, m) => n + Number(m[1]), 0);
      expect(sizes + down.body.replace(/\[\d+\]/g, '').length).toBe(8 * 1024 * 1024);
    } finally {
      session.close();
    }
  });

  it('puts the body through request-body-find-replace on its way to the service', async () => {
    const host = h2Endpoint(
      'on_http_request: [{actions: [{type: request-body-find-replace, config: {replacements: [{from: "a", to: "bb"}]}}]}]',
    );
    const session = connect(host);
    try {
      // 3 bytes in, each doubled: the service counts 6 (its Content-Length was dropped).
      const reply = await call(session, host, '/unary', Buffer.from('aaa'), 'text/plain');
      expect([reply.headers[':status'], reply.body]).toEqual([200, 'got 6']);
      expect(reply.trailers['x-size']).toBe('6');
    } finally {
      session.close();
    }
  });

  it('passes a reset on both ways: a cancelled call is cancelled at the service, a reset from it reaches the client', async () => {
    const host = h2Endpoint();
    const session = connect(host);
    try {
      const before = closed.length;
      const stream = session.request({ ':method': 'POST', ':path': '/hang', ':authority': host });
      stream.on('error', () => undefined);
      stream.write('x');
      await until(() => closed.length > before || stream.sentHeaders !== undefined);
      await new Promise((r) => setTimeout(r, 50));
      stream.close(constants.NGHTTP2_CANCEL);
      await until(() => closed.some((c) => c.path === '/hang'));
      expect(closed.find((c) => c.path === '/hang')!.code).toBe(constants.NGHTTP2_CANCEL);

      const reset = await call(session, host, '/reset');
      expect(reset.headers[':status']).toBe(200);
      expect(reset.code).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    } finally {
      session.close();
    }
  });

  it('answers a gRPC client’s refusal and a name nobody serves with gRPC statuses', async () => {
    const host = h2Endpoint(POLICY);
    const session = connect(host);
    try {
      const denied = await call(session, host, '/deny');
      expect([denied.headers[':status'], denied.headers['grpc-status']]).toEqual([200, '7']);
      expect(denied.headers['content-type']).toBe('application/grpc');
      // The same refusal to a client that is not gRPC is the page.
      const page = await call(session, host, '/deny', undefined, 'text/plain');
      expect(page.headers[':status']).toBe(403);
    } finally {
      session.close();
    }
    const nobody = 'nobody-h2call.burrow.test';
    const other = connect(nobody);
    try {
      const missing = await call(other, nobody, '/unary');
      expect([missing.headers[':status'], missing.headers['grpc-status']]).toEqual([200, '14']);
      expect(missing.headers['burrow-error-code']).toMatch(/^ERR_/);
    } finally {
      other.close();
    }
  });
});

/**
 * An HTTP/1.1 client of an `http2` endpoint: the relay carries its requests through an H2Bridge
 * (h2-bridge.ts), the service getting HTTP/2 calls and the client HTTP/1.1 answers, on one kept
 * connection.
 */
describe('HTTP/1.1 requests to an http2 service on the relay (h2-bridge.ts)', () => {
  /** Raw HTTP/1.1 over one connection: `text` sent, everything read until the edge closes it. */
  const exchange = (text: string | Buffer): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = netConnect(t.httpPort, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
      socket.write(text);
    });

  it('answers calls in HTTP/1.1, chunked with the service’s trailers, on one kept connection', async () => {
    const host = h2Endpoint(POLICY);
    const body = 'ping';
    const reply = await exchange(
      `POST /unary HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/grpc\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}` +
        `POST /unary HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n` +
        `3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n` +
        `GET /deny HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    const answers = reply.split(/(?=HTTP\/1\.1 )/);
    expect(answers.map((a) => a.slice(0, 12))).toEqual([
      'HTTP/1.1 200',
      'HTTP/1.1 200',
      'HTTP/1.1 403',
    ]);
    // The service's head (the policy's header too), its data chunked, its trailers after it.
    expect(answers[0]).toMatch(/\r\nx-served-by: burrow\r\n/i);
    expect(answers[0]).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
    expect(answers[0]).toMatch(/\r\n5\r\ngot 4\r\n0\r\ngrpc-status: 0\r\nx-size: 4\r\n\r\n$/);
    expect(answers[1]).toMatch(/got 5\r\n0\r\ngrpc-status: 0\r\nx-size: 5\r\n\r\n$/);
  });

  it('sends a body request-body-find-replace rewrites, its length gone, as the HTTP/2 call’s', async () => {
    const host = h2Endpoint(
      'on_http_request: [{actions: [{type: request-body-find-replace, config: {replacements: [{from: "a", to: "bb"}]}}]}]',
    );
    const reply = await exchange(
      `POST /unary HTTP/1.1\r\nHost: ${host}\r\nContent-Type: text/plain\r\n` +
        `Content-Length: 3\r\nConnection: close\r\n\r\naaa`,
    );
    // 3 bytes in, each doubled: the service counts 6.
    expect(reply).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\n5\r\ngot 6\r\n0\r\n/);
  });

  it('answers an HTTP/1.1 gRPC client’s refusal and a name nobody serves with gRPC statuses', async () => {
    const host = h2Endpoint(POLICY);
    const call1 = (name: string, close = false): string =>
      `POST /deny HTTP/1.1\r\nHost: ${name}\r\nContent-Type: application/grpc\r\n` +
      `Content-Length: 0\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
    const reply = await exchange(call1(host) + call1('nobody-h1grpc.burrow.test', true));
    const [denied, missing] = reply.split(/(?=HTTP\/1\.1 )/);
    // 200 with the status in the head and no body: gRPC's trailers-only answer, as HTTP/1.1.
    expect(denied).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\ngrpc-status: 7\r\n/i);
    expect(denied).toMatch(/\r\ncontent-type: application\/grpc\r\n/i);
    expect(denied).toMatch(/\r\ncontent-length: 0\r\n/i);
    expect(missing).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\ngrpc-status: 14\r\n/i);
    expect(missing).toMatch(/\r\nburrow-error-code: ERR_/i);
    // Written by the relay: Node's server would have said Keep-Alive: timeout=….
    expect(denied).not.toMatch(/\r\nkeep-alive:/i);
  });

  it('answers an HTTP/1.0 client without chunks, and an upgrade request as the plain one it becomes', async () => {
    const host = h2Endpoint();
    const old = await exchange(
      `POST /unary HTTP/1.0\r\nHost: ${host}\r\nContent-Length: 4\r\n\r\nping`,
    );
    // Read to the connection's end: no chunks, no trailers, for a client that knows neither.
    expect(old).toMatch(/^HTTP\/1\.1 200 /);
    expect(old).not.toMatch(/transfer-encoding/i);
    expect(old.endsWith('\r\n\r\ngot 4')).toBe(true);
    const upgrade = await exchange(
      `GET /unary HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n`,
    );
    // The service speaks HTTP/2, which has no such upgrade: it answers the request itself.
    expect(upgrade).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\n5\r\ngot 0\r\n0\r\n/);
  });

  it('cancels the call at the service when the HTTP/1.1 client leaves before the answer', async () => {
    const host = h2Endpoint();
    const before = closed.length;
    const socket = netConnect(t.httpPort, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(`GET /hang HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    // The call reached the service (its session and stream are open), then the client goes.
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    await until(() => closed.slice(before).some((c) => c.path === '/hang'));
    const call = closed.slice(before).find((c) => c.path === '/hang')!;
    expect(call.code).toBe(constants.NGHTTP2_CANCEL);
  });

  it('streams an 8 MiB download and a 1 MiB upload, and breaks the answer the service resets', async () => {
    const host = h2Endpoint();
    const down = await exchange(
      `GET /download HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    const [head, chunked] = [
      down.slice(0, down.indexOf('\r\n\r\n')),
      down.slice(down.indexOf('\r\n\r\n') + 4),
    ];
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    // Decode the chunked body: 8 MiB of 'a'.
    let size = 0;
    for (let at = 0; ;) {
      const line = chunked.indexOf('\r\n', at);
      const n = parseInt(chunked.slice(at, line), 16);
      if (n === 0) break;
      size += n;
      at = line + 2 + n + 2;
    }
    expect(size).toBe(8 * 1024 * 1024);
    const upload = Buffer.alloc(1024 * 1024, 0x62);
    const up = await exchange(
      Buffer.concat([
        Buffer.from(
          `POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${upload.length}\r\nConnection: close\r\n\r\n`,
        ),
        upload,
      ]),
    );
    expect(up).toMatch(/got 1048576\r\n0\r\n/);
    // The service sends its head and some data, then resets: the client sees the answer broken
    // (the connection closes without the last chunk), not short.
    const reset = await exchange(`GET /reset HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    expect(reset).toMatch(/^HTTP\/1\.1 200 [\s\S]*7\r\npartial\r\n$/);
  });
});
