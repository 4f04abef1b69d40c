/**
 * Response bodies changed on the relay's pipeline (body-transforms.ts), over real sockets:
 * compress-response gives an HTTP/1.1 client the body compressed and chunked on a connection that
 * stays usable, an HTTP/1.0 one until the connection closes, an HTTP/2 one as DATA frames; a body
 * the agent sent chunked is compressed decoded; a client that accepts no encoding gets the body as
 * it was; response-body-find-replace rewrites the body, before compress-response encodes it. The
 * relay carries them: the services send no Date, and the relay passes their heads on as bytes.
 */
import http2 from 'node:http2';
import net from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { gunzipSync, inflateSync, brotliDecompressSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  rawExchange,
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

const COMPRESS = `
on_http_response:
  - actions: [{type: compress-response}]
`;
const TEXT = 'the quick brown fox jumps over the lazy dog. '.repeat(2000);

let t: TestIngress;
let endpoints: PolicyEndpoints;
/** `/sized` answers TEXT with a length, `/chunked` in two writes without one; no Date. */
let service: LocalServer;

beforeAll(async () => {
  t = await startTestIngress();
  endpoints = policyEndpoints(t.registry);
  service = await startHttpUpstream((req: IncomingMessage, res: ServerResponse) => {
    res.sendDate = false;
    res.setHeader('Content-Type', 'text/plain');
    if (req.url === '/echo') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const framing = req.headers['transfer-encoding'] ?? 'length';
        const body = `${framing} ${Buffer.concat(chunks).toString()}`;
        res.setHeader('Content-Length', Buffer.byteLength(body));
        res.end(body);
      });
      return;
    }
    if (req.url === '/sized') {
      res.setHeader('Content-Length', Buffer.byteLength(TEXT));
      res.end(TEXT);
      return;
    }
    res.write(TEXT.slice(0, 1000));
    res.end(TEXT.slice(1000));
  });
});
afterEach(() => endpoints.removeAll());
afterAll(async () => {
  await t.close();
  await service.close();
});

/** The head and the body of one raw HTTP/1.1 response in `bytes`, the body de-chunked. */
function splitResponse(bytes: Buffer): { head: string; body: Buffer; rest: Buffer } {
  const end = bytes.indexOf('\r\n\r\n');
  const head = bytes.subarray(0, end).toString('latin1');
  let at = end + 4;
  if (!/\r\ntransfer-encoding: chunked/i.test(head)) {
    const length = /\r\ncontent-length: (\d+)/i.exec(head);
    const n = length ? Number(length[1]) : bytes.length - at;
    return { head, body: bytes.subarray(at, at + n), rest: bytes.subarray(at + n) };
  }
  const parts: Buffer[] = [];
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at);
    const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
    at = lineEnd + 2;
    if (size === 0) return { head, body: Buffer.concat(parts), rest: bytes.subarray(at + 2) };
    parts.push(bytes.subarray(at, at + size));
    at += size + 2;
  }
}

const REWRITE_REQUEST = `
on_http_request:
  - actions: [{type: request-body-find-replace, config: {replacements: [{from: "secret-(\\\\d+)", to: "xxx-$1"}]}}]
`;

const REWRITE_AND_COMPRESS = `
on_http_response:
  - actions:
      - {type: response-body-find-replace, config: {replacements: [{from: "quick (brown)", to: "slow $1"}]}}
      - {type: compress-response}
`;

describe('response bodies changed on the relay', () => {
  it.each(['/sized', '/chunked'])(
    'compresses %s for an HTTP/1.1 client and keeps the connection',
    async (path) => {
      const host = endpoints.publicEndpoint('http', service.port, COMPRESS).hostname!;
      const socket = net.connect(t.httpPort, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (d: Buffer) => chunks.push(d));
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      const ask = (close: boolean): string =>
        `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nAccept-Encoding: gzip\r\n` +
        `${close ? 'Connection: close\r\n' : ''}\r\n`;
      socket.write(ask(false));
      await until(() => Buffer.concat(chunks).includes('\r\n0\r\n\r\n'));
      socket.write(ask(true));
      await closed;
      const first = splitResponse(Buffer.concat(chunks));
      expect(first.head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(first.head).toMatch(/\r\ncontent-encoding: gzip/i);
      expect(first.head).not.toMatch(/\r\ncontent-length:/i);
      expect(first.head).not.toMatch(/\r\ndate:/i);
      expect(gunzipSync(first.body).toString()).toBe(TEXT);
      expect(first.body.length).toBeLessThan(TEXT.length / 10);
      const second = splitResponse(first.rest);
      expect(gunzipSync(second.body).toString()).toBe(TEXT);
    },
  );

  it('compresses for an HTTP/1.0 client until the connection closes', async () => {
    const host = endpoints.publicEndpoint('http', service.port, COMPRESS).hostname!;
    const reply = Buffer.from(
      await rawExchange(
        t.httpPort,
        `GET /sized HTTP/1.0\r\nHost: ${host}\r\nAccept-Encoding: deflate\r\n\r\n`,
      ),
      'latin1',
    );
    const { head, body } = splitResponse(reply);
    expect(head).toMatch(/\r\ncontent-encoding: deflate/i);
    expect(head).toMatch(/\r\nConnection: close/);
    expect(inflateSync(body).toString()).toBe(TEXT);
  });

  it('leaves the body alone for a client that accepts no encoding', async () => {
    const host = endpoints.publicEndpoint('http', service.port, COMPRESS).hostname!;
    const reply = Buffer.from(
      await rawExchange(
        t.httpPort,
        `GET /sized HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      ),
      'latin1',
    );
    const { head, body } = splitResponse(reply);
    expect(head).not.toMatch(/content-encoding/i);
    expect(head).toMatch(/\r\nContent-Length: \d+/);
    expect(body.toString()).toBe(TEXT);
  });

  it.each(['/sized', '/chunked'])(
    'rewrites %s with response-body-find-replace, then compresses it',
    async (path) => {
      const host = endpoints.publicEndpoint('http', service.port, REWRITE_AND_COMPRESS).hostname!;
      const ask = (encoding: string): Promise<string> =>
        rawExchange(
          t.httpPort,
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${encoding}Connection: close\r\n\r\n`,
        );
      const expected = TEXT.replaceAll('quick brown', 'slow brown');
      const plain = splitResponse(Buffer.from(await ask(''), 'latin1'));
      expect(plain.head).not.toMatch(/\r\ndate:/i);
      expect(plain.head).toMatch(/\r\nTransfer-Encoding: chunked/i);
      expect(plain.body.toString()).toBe(expected);
      const gzipped = splitResponse(Buffer.from(await ask('Accept-Encoding: gzip\r\n'), 'latin1'));
      expect(gunzipSync(gzipped.body).toString()).toBe(expected);
    },
  );

  it('rewrites a request body with request-body-find-replace, sent on chunked', async () => {
    const host = endpoints.publicEndpoint('http', service.port, REWRITE_REQUEST).hostname!;
    const body = 'a secret-42 and a secret-7 '.repeat(3000);
    const expected = body.replaceAll('secret-', 'xxx-');
    const sized = splitResponse(
      Buffer.from(
        await rawExchange(
          t.httpPort,
          `POST /echo HTTP/1.1\r\nHost: ${host}\r\nContent-Type: text/plain\r\n` +
            `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        ),
        'latin1',
      ),
    );
    expect(sized.head).not.toMatch(/\r\ndate:/i);
    expect(sized.body.toString()).toBe(`chunked ${expected}`);
    const chunkedBody = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const chunked = splitResponse(
      Buffer.from(
        await rawExchange(
          t.httpPort,
          `POST /echo HTTP/1.1\r\nHost: ${host}\r\nContent-Type: text/plain\r\n` +
            `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunkedBody}`,
        ),
        'latin1',
      ),
    );
    expect(chunked.body.toString()).toBe(`chunked ${expected}`);
    const session = http2.connect(`https://127.0.0.1:${t.httpsPort}`, {
      ca: t.ca.certPem,
      servername: host,
    });
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/echo',
        ':authority': host,
        'content-type': 'text/plain',
      });
      let text = '';
      stream.setEncoding('utf8');
      stream.on('data', (d: string) => (text += d));
      stream.end(body);
      await new Promise((resolve) => stream.on('end', resolve));
      expect(text).toBe(`chunked ${expected}`);
    } finally {
      session.close();
    }
  });

  it('compresses for an HTTP/2 client', async () => {
    const host = endpoints.publicEndpoint('http', service.port, COMPRESS).hostname!;
    const session = http2.connect(`https://127.0.0.1:${t.httpsPort}`, {
      ca: t.ca.certPem,
      servername: host,
    });
    try {
      for (const path of ['/sized', '/chunked']) {
        const stream = session.request({
          ':path': path,
          ':authority': host,
          'accept-encoding': 'br',
        });
        const chunks: Buffer[] = [];
        let encoding: unknown;
        stream.on('response', (h) => (encoding = h['content-encoding']));
        stream.on('data', (d: Buffer) => chunks.push(d));
        await new Promise((resolve) => stream.on('end', resolve));
        expect(encoding).toBe('br');
        expect(brotliDecompressSync(Buffer.concat(chunks)).toString()).toBe(TEXT);
      }
    } finally {
      session.close();
    }
  });
});
