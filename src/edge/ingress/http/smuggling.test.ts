/**
 * The request-smuggling and malformed-HTTP corpus, sent as raw bytes to a real ingress in front of
 * a real HTTP service. Each case gets the right status or a closed connection, and the service
 * sees either nothing or exactly the request the edge judged; never a second, smuggled request.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../core/limits.js';
import {
  fakeTunnel,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';

interface Seen {
  method: string;
  url: string;
  body: string;
  trailers: Record<string, string>;
}

let ingress: TestIngress;
let upstream: LocalServer;
const seen: Seen[] = [];

beforeAll(async () => {
  ingress = await startTestIngress({
    limits: { ...DEFAULT_LIMITS, headersTimeoutMs: 400, maxHeaderBytes: 4096, maxHeaderCount: 20 },
  });
  upstream = await startHttpUpstream((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    // Only a request read to its end counts: one cut off mid-body never reached the service whole.
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        body: Buffer.concat(chunks).toString('latin1'),
        trailers: req.trailers as Record<string, string>,
      });
      res.end('ok');
    });
  });
  ingress.registry.addTunnel(
    fakeTunnel({ proto: 'http', hostname: 'h.burrow.test', upstreamPort: upstream.port }),
  );
});

afterAll(async () => {
  await ingress.close();
  await upstream.close();
});

/** Send `bytes`, read until the ingress closes the connection or `idleMs` pass without a byte. */
function exchange(bytes: string, idleMs = 600): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(ingress.httpPort, '127.0.0.1');
    let text = '';
    let timer = setTimeout(() => done(false), idleMs);
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed });
    };
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(() => done(false), idleMs);
    });
    socket.on('close', () => done(true));
    socket.on('error', () => undefined);
    socket.write(bytes, 'latin1');
  });
}

const HOST = 'Host: h.burrow.test\r\n';
const SMUGGLED = `GET /smuggled HTTP/1.1\r\n${HOST}\r\n`;

/** Each case: raw request bytes and the status the ingress must answer before closing. */
const REFUSED: Array<[string, string, number]> = [
  [
    'Content-Length with Transfer-Encoding',
    `POST / HTTP/1.1\r\n${HOST}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
    400,
  ],
  [
    'Transfer-Encoding with Content-Length',
    `POST / HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n0\r\n\r\n${SMUGGLED}`,
    400,
  ],
  [
    'two different Content-Lengths',
    `POST / HTTP/1.1\r\n${HOST}Content-Length: 0\r\nContent-Length: 40\r\n\r\n${SMUGGLED}`,
    400,
  ],
  [
    'two equal Content-Lengths',
    `POST / HTTP/1.1\r\n${HOST}Content-Length: 2\r\nContent-Length: 2\r\n\r\nhi`,
    400,
  ],
  ['a signed Content-Length', `POST / HTTP/1.1\r\n${HOST}Content-Length: +2\r\n\r\nhi`, 400],
  ['a Content-Length list', `POST / HTTP/1.1\r\n${HOST}Content-Length: 2, 2\r\n\r\nhi`, 400],
  ['a hex Content-Length', `POST / HTTP/1.1\r\n${HOST}Content-Length: 0x2\r\n\r\nhi`, 400],
  [
    'a huge Content-Length',
    `POST / HTTP/1.1\r\n${HOST}Content-Length: 99999999999999999999\r\n\r\nhi`,
    400,
  ],
  [
    'chunked not last',
    `POST / HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`,
    400,
  ],
  [
    'a coding other than chunked',
    `POST / HTTP/1.1\r\n${HOST}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    501,
  ],
  [
    'a near-miss coding',
    `POST / HTTP/1.1\r\n${HOST}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`,
    400,
  ],
  [
    'Transfer-Encoding in HTTP/1.0',
    `POST / HTTP/1.0\r\n${HOST}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    400,
  ],
  [
    'whitespace before a colon',
    `POST / HTTP/1.1\r\n${HOST}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n`,
    400,
  ],
  ['obs-fold', `GET / HTTP/1.1\r\n${HOST}X-A: 1\r\n  folded\r\n\r\n`, 400],
  ['bare LF line ends', `GET / HTTP/1.1\n${HOST.replace('\r', '')}\n`, 400],
  ['a bare LF in a header', `GET / HTTP/1.1\r\n${HOST}X-A: 1\nX-B: 2\r\n\r\n`, 400],
  ['a bare CR in a header', `GET / HTTP/1.1\r\n${HOST}X-A: 1\rX-B: 2\r\n\r\n`, 400],
  ['NUL in a header value', `GET / HTTP/1.1\r\n${HOST}X-A: a\x00b\r\n\r\n`, 400],
  ['a control byte in a header value', `GET / HTTP/1.1\r\n${HOST}X-A: a\x1bb\r\n\r\n`, 400],
  ['DEL in a header name', `GET / HTTP/1.1\r\n${HOST}X\x7fA: 1\r\n\r\n`, 400],
  ['NUL in the request target', `GET /a\x00b HTTP/1.1\r\n${HOST}\r\n`, 400],
  ['two Host headers', `GET / HTTP/1.1\r\n${HOST}Host: other.burrow.test\r\n\r\n`, 400],
  ['an invalid method', `G(E)T / HTTP/1.1\r\n${HOST}\r\n`, 400],
  ['an unknown HTTP version', `GET / HTTP/2.0\r\n${HOST}\r\n`, 505],
  ['a malformed version', `GET / HTTP/1.1x\r\n${HOST}\r\n`, 400],
  ['a request line over the limit', `GET /${'a'.repeat(5000)} HTTP/1.1\r\n${HOST}\r\n`, 414],
  ['headers over the limit', `GET / HTTP/1.1\r\n${HOST}X-Big: ${'b'.repeat(5000)}\r\n\r\n`, 431],
];

/** Chunked bodies whose framing is broken: the head went on, the body never completes. */
const BROKEN_CHUNKS: Array<[string, string]> = [
  ['a negative chunk size', '-1\r\nx\r\n0\r\n\r\n'],
  ['a hex prefix', '0x5\r\nhello\r\n0\r\n\r\n'],
  ['a chunk size over 12 digits', `${'f'.repeat(17)}\r\nx\r\n0\r\n\r\n`],
  ['a missing chunk size', '\r\nhello\r\n0\r\n\r\n'],
  ['a non-hex chunk size', '5g\r\nhello\r\n0\r\n\r\n'],
  ['a control byte in an extension', '5;a=\x01\r\nhello\r\n0\r\n\r\n'],
  ['an unterminated quoted extension', '5;a="x\r\nhello\r\n0\r\n\r\n'],
  ['an extension without a name', '5;=x\r\nhello\r\n0\r\n\r\n'],
  ['an extension over the limit', `5;a=${'x'.repeat(5000)}\r\nhello\r\n0\r\n\r\n`],
  ['chunk data longer than its size', `3\r\nhello\r\n0\r\n\r\n${SMUGGLED}`],
  ['a bare LF after the size', '5\nhello\r\n0\r\n\r\n'],
  ['obs-fold in a trailer', '0\r\nX-T: 1\r\n folded\r\n\r\n'],
];

describe('request smuggling and malformed HTTP', () => {
  it.each(REFUSED)('refuses %s', async (_name, bytes, status) => {
    const before = seen.length;
    const reply = await exchange(bytes);
    expect(reply.text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(reply.closed).toBe(true);
    expect(seen.length).toBe(before);
  });

  it.each(BROKEN_CHUNKS)(
    'closes on %s, and the service never gets a whole request',
    async (_name, body) => {
      const before = seen.length;
      const reply = await exchange(
        `POST /chunked HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked\r\n\r\n${body}`,
      );
      expect(reply.closed).toBe(true);
      expect(reply.text === '' || reply.text.startsWith('HTTP/1.1 400 ')).toBe(true);
      expect(seen.slice(before)).toEqual([]);
    },
  );

  it('refuses more header fields than --max-header-count', async () => {
    const many = Array.from({ length: 25 }, (_, i) => `X-${i}: ${i}\r\n`).join('');
    const reply = await exchange(`GET / HTTP/1.1\r\n${HOST}${many}\r\n`);
    expect(reply.text).toMatch(/^HTTP\/1\.1 431 /);
    expect(reply.text).toContain('ERR_BURROW_TOO_MANY_HEADERS');
  });

  it('answers 408 and closes when a client stalls in the middle of a head', async () => {
    const reply = await exchange(`GET / HTTP/1.1\r\n${HOST}X-Slow: `, 2000);
    expect(reply.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(reply.closed).toBe(true);
  });

  it('carries a valid chunked body with extensions and trailers exactly as sent', async () => {
    const before = seen.length;
    const reply = await exchange(
      `POST /ok HTTP/1.1\r\n${HOST}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
        '5;name=value;quoted="a b"\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n',
    );
    expect(reply.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen.slice(before)).toEqual([
      { method: 'POST', url: '/ok', body: 'hello world', trailers: { 'x-trailer': 't' } },
    ]);
  });

  it('sends a body that looks like a request as the body of one request, not as two', async () => {
    const before = seen.length;
    const reply = await exchange(
      `POST /one HTTP/1.1\r\n${HOST}Content-Length: ${SMUGGLED.length}\r\nConnection: close\r\n\r\n${SMUGGLED}`,
    );
    expect(reply.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen.slice(before)).toEqual([
      { method: 'POST', url: '/one', body: SMUGGLED, trailers: {} },
    ]);
  });

  it('answers pipelined requests in order on one connection, each judged on its own', async () => {
    const before = seen.length;
    const reply = await exchange(
      `GET /p1 HTTP/1.1\r\n${HOST}\r\nPOST /p2 HTTP/1.1\r\n${HOST}Content-Length: 3\r\n\r\nabc` +
        `GET /p3 HTTP/1.1\r\n${HOST}Content-Length: 1\r\nContent-Length: 2\r\n\r\n`,
    );
    expect(reply.text.match(/HTTP\/1\.1 \d{3}/g)).toEqual([
      'HTTP/1.1 200',
      'HTTP/1.1 200',
      'HTTP/1.1 400',
    ]);
    expect(reply.closed).toBe(true);
    expect(seen.slice(before).map((s) => `${s.url} ${s.body}`)).toEqual(['/p1 ', '/p2 abc']);
  });
});
