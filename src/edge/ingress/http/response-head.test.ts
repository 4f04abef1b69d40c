import { describe, expect, it } from 'vitest';
import { ChunkedFramer, LengthFramer } from './body-framing.js';
import { HeadScanner } from './head-syntax.js';
import { parseResponseHead, type ResponseHead } from './response-head.js';

function head(text: string, method = 'GET'): ResponseHead {
  const parsed = parseResponseHead(text, method);
  if (!('raw' in parsed)) throw new Error(parsed.reason);
  return parsed;
}

describe('response heads from agents', () => {
  it('frames by Content-Length, drops hop-by-hop and Connection-listed headers', () => {
    const r = head(
      'HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\nX-Kept: 2\r\n\r\n',
    );
    expect(r).toMatchObject({ status: 200, reason: 'OK', close: false });
    expect(r.framing).toEqual({ kind: 'length', length: 12 });
    expect(r.raw).toEqual(['Content-Length', '12', 'X-Kept', '2']);
  });

  it('keeps a chunked coding (relayed as it came) and drops a Content-Length beside it', () => {
    const r = head('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n');
    expect(r.framing).toEqual({ kind: 'chunked' });
    expect(r.raw).toEqual(['Transfer-Encoding', 'chunked']);
  });

  it('has no body for HEAD, 1xx, 204 and 304, whatever the headers say', () => {
    expect(head('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n', 'HEAD').framing.kind).toBe('none');
    expect(head('HTTP/1.1 204 No Content\r\n\r\n').framing.kind).toBe('none');
    expect(head('HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n').framing.kind).toBe(
      'none',
    );
    expect(head('HTTP/1.1 100 Continue\r\n\r\n').framing.kind).toBe('none');
  });

  it('reads a body without framing to the end of the stream, and closes after it', () => {
    const r = head('HTTP/1.1 200 OK\r\n\r\n');
    expect(r.framing.kind).toBe('close');
    expect(r.close).toBe(true);
    expect(head('HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n').close).toBe(true);
    expect(head('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n').close).toBe(
      true,
    );
  });

  it.each([
    ['a malformed status line', 'HTTP/1.1 OK\r\n\r\n'],
    ['a status under 100', 'HTTP/1.1 099 Low\r\n\r\n'],
    ['two different lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n'],
    ['a malformed length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'],
    ['a coding other than chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n'],
    ['obs-fold', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n'],
  ])('answers 502 for %s', (_name, text) => {
    expect(parseResponseHead(text, 'GET')).toMatchObject({ status: 502 });
  });
});

describe('status lines', () => {
  /** What the status line's regular expression (before it was read by hand) accepts. */
  const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;

  it('reads the lines the regular expression reads, and refuses the others', () => {
    const lines = [
      'HTTP/1.1 200 OK',
      'HTTP/1.0 404 Not Found',
      'HTTP/1.1 200',
      'HTTP/1.1 200 ',
      'HTTP/1.1 599 x y z',
      'HTTP/1.1 2000 OK',
      'HTTP/1.2 200 OK',
      'HTTP/1.1 200OK',
      'HTTP/1.1  200 OK',
      'HTTP/1.1 20 OK',
      'HTTP/1.1 2x0 OK',
      'HTTP/2.0 200 OK',
      'http/1.1 200 OK',
      'HTTP/1.1 200 a\rb',
      'HTTP/1.1 200 caf\u00e9',
      'ICY 200 OK',
    ];
    for (const line of lines) {
      const parsed = parseResponseHead(`${line}\r\nContent-Length: 0\r\n\r\n`, 'GET');
      const m = STATUS_LINE.exec(line);
      if (!m) {
        expect(parsed, line).toEqual({ status: 502, reason: 'a malformed status line' });
        continue;
      }
      expect(parsed, line).toMatchObject({ status: Number(m[2]), reason: m[3] ?? '' });
      expect('raw' in parsed && parsed.close, line).toBe(m[1] === '0');
    }
  });

  it('matches header names in any case, and passes others on as they came', () => {
    const r = head(
      'HTTP/1.1 200 OK\r\nDATE: x\r\ncontent-LENGTH: 3\r\nKEEP-ALIVE: timeout=5\r\nTE: x\r\nX-Long-Name-Of-Thirty-Two-Chars-x: 1\r\n\r\n',
    );
    expect(r.framing).toEqual({ kind: 'length', length: 3 });
    expect(r.raw).toEqual([
      'DATE',
      'x',
      'content-LENGTH',
      '3',
      'X-Long-Name-Of-Thirty-Two-Chars-x',
      '1',
    ]);
  });
});

describe('head scanning and body framing', () => {
  it('finds the end of a head that arrives one byte at a time, reading each byte once', () => {
    const text = Buffer.from('HTTP/1.1 200 OK\r\nX: 1\r\n\r\nbody');
    const scanner = new HeadScanner();
    let end = -1;
    for (let n = 1; n <= text.length && end < 0; n++) {
      const found = scanner.scan(text.subarray(0, n));
      if (typeof found === 'string') throw new Error(found);
      end = found;
    }
    expect(end).toBe(text.length - 4);
  });

  it('refuses a bare LF as soon as it arrives', () => {
    expect(new HeadScanner().scan(Buffer.from('GET / HTTP/1.1\n'))).toBe('a bare LF');
  });

  it('finds where a chunked body ends across reads and leaves the next message alone', () => {
    const framer = new ChunkedFramer();
    const wire = Buffer.from('5\r\nhello\r\n10;x=y\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\nNEXT');
    let taken = 0;
    for (let at = 0; at < wire.length && !framer.done; at += 3) {
      const piece = wire.subarray(at, Math.min(at + 3, wire.length));
      const n = framer.take(piece, 0);
      if (typeof n === 'string') throw new Error(n);
      taken += n;
    }
    expect(framer.done).toBe(true);
    expect(wire.subarray(taken).toString()).toBe('NEXT');
  });

  it('counts down a Content-Length body', () => {
    const framer = new LengthFramer(4);
    expect(framer.take(Buffer.from('ab'), 0)).toBe(2);
    expect(framer.take(Buffer.from('cdGET'), 0)).toBe(2);
    expect(framer.done).toBe(true);
  });
});
