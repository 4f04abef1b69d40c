import { describe, expect, it } from 'vitest';
import { HttpObserver, type HttpExchange } from './http-observer.js';

function observe(): { observer: HttpObserver; seen: Array<[string, string, number]> } {
  const seen: Array<[string, string, number]> = [];
  const observer = new HttpObserver('203.0.113.7:4000', (x: HttpExchange) => {
    expect(x.clientAddr).toBe('203.0.113.7:4000');
    expect(x.durationMs).toBeGreaterThanOrEqual(0);
    seen.push([x.method, x.path, x.status]);
  });
  return { observer, seen };
}

/** Feed `text` one byte at a time, the hardest split for a parser. */
function bytewise(feed: (chunk: Buffer) => void, text: string): void {
  for (const byte of Buffer.from(text, 'latin1')) feed(Buffer.from([byte]));
}

describe('HttpObserver', () => {
  it('reports keep-alive exchanges with fixed-length bodies, once each response ends', () => {
    const { observer, seen } = observe();
    observer.request(Buffer.from('POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello'));
    observer.response(Buffer.from('HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nab'));
    expect(seen).toEqual([]);
    observer.response(Buffer.from('c'));
    expect(seen).toEqual([['POST', '/a', 201]]);
    observer.request(Buffer.from('GET /b?q=1 HTTP/1.1\r\nHost: x\r\n\r\n'));
    observer.response(Buffer.from('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n'));
    expect(seen).toEqual([
      ['POST', '/a', 201],
      ['GET', '/b?q=1', 404],
    ]);
  });

  it('keeps its own copy of a head that continues in a later read: the read memory is reused', () => {
    const { observer, seen } = observe();
    const read = Buffer.alloc(64);
    const feed = (text: string): void => {
      // One buffer read into again each time, as a socket reading into slabs is once written.
      const n = read.write(text, 'latin1');
      observer.request(read.subarray(0, n));
      read.fill(0x7a);
    };
    feed('DELETE /items/');
    feed('42 HTTP/1.1\r\nHost: x\r\n\r\n');
    observer.response(Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'));
    expect(seen).toEqual([['DELETE', '/items/42', 204]]);
  });

  it('follows chunked bodies split anywhere, with extensions and trailers', () => {
    const { observer, seen } = observe();
    bytewise(
      (c) => observer.request(c),
      'PUT /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nwiki\r\n0\r\nX-T: 1\r\n\r\n' +
        'GET /next HTTP/1.1\r\n\r\n',
    );
    bytewise(
      (c) => observer.response(c),
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n0\r\n\r\n' +
        'HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n',
    );
    expect(seen).toEqual([
      ['PUT', '/up', 200],
      ['GET', '/next', 304],
    ]);
  });

  it('reads a 60 KiB head fed one byte at a time in linear time, and one split at its CRLFs', () => {
    const { observer, seen } = observe();
    const big = `GET /big HTTP/1.1\r\nX-Pad: ${'p'.repeat(60 * 1024)}\r\n\r\n`;
    // Quadratic reassembly took about 20 s of CPU for this; linear is milliseconds.
    bytewise((c) => observer.request(c), big);
    const split = '\r\nGET /split HTTP/1.1\r\nHost: x\r\n\r\n';
    for (const piece of split.split(/(?<=\r)/)) observer.request(Buffer.from(piece, 'latin1'));
    observer.response(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    observer.response(Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'));
    expect(seen).toEqual([
      ['GET', '/big', 200],
      ['GET', '/split', 204],
    ]);
  });

  it('pairs pipelined requests in order and knows HEAD and 204 have no body', () => {
    const { observer, seen } = observe();
    observer.request(
      Buffer.from('HEAD /h HTTP/1.1\r\n\r\nDELETE /d HTTP/1.1\r\n\r\nGET /g HTTP/1.1\r\n\r\n'),
    );
    observer.response(
      Buffer.from(
        'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n' +
          'HTTP/1.1 204 No Content\r\n\r\n' +
          'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
      ),
    );
    expect(seen).toEqual([
      ['HEAD', '/h', 200],
      ['DELETE', '/d', 204],
      ['GET', '/g', 200],
    ]);
  });

  it('skips 100 Continue and reports a response delimited by the close when it closes', () => {
    const { observer, seen } = observe();
    observer.request(
      Buffer.from('POST /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n'),
    );
    observer.response(Buffer.from('HTTP/1.1 100 Continue\r\n\r\n'));
    observer.request(Buffer.from('hi'));
    observer.response(Buffer.from('HTTP/1.0 200 OK\r\n\r\nstreamed until the end'));
    expect(seen).toEqual([]);
    observer.close();
    expect(seen).toEqual([['POST', '/c', 200]]);
  });

  it('reports an upgrade and then leaves the connection alone', () => {
    const { observer, seen } = observe();
    observer.request(
      Buffer.from('GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'),
    );
    observer.response(
      Buffer.from('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x02hi'),
    );
    observer.request(Buffer.from('\x81\x82GET / HTTP/1.1\r\n\r\n'));
    observer.response(Buffer.from('HTTP/1.1 200 OK\r\n\r\n'));
    observer.close();
    expect(seen).toEqual([['GET', '/ws', 101]]);
  });

  it('gives up on bytes that are not HTTP without throwing', () => {
    const { observer, seen } = observe();
    observer.request(Buffer.from('GET / HTTP/1.1\r\nContent-Length: nope\r\n\r\n'));
    observer.response(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    observer.request(Buffer.alloc(100 * 1024, 0x41));
    expect(seen).toEqual([]);
  });

  it('captures each message as forwarded, split anywhere, up to the limit with the full size', () => {
    const seen: HttpExchange[] = [];
    const observer = new HttpObserver('203.0.113.7:4000', (x) => seen.push(x), 50);
    const first = 'POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello';
    const second = 'PUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n';
    bytewise((c) => observer.request(c), first + second);
    const answer1 = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';
    const answer2 = 'HTTP/1.1 201 Created\r\nContent-Length: 60\r\n\r\n' + 'x'.repeat(60);
    bytewise((c) => observer.response(c), answer1 + answer2);
    expect(seen.map((x) => x.request?.raw.toString('latin1'))).toEqual([
      first,
      second.slice(0, 50),
    ]);
    expect(seen.map((x) => x.request?.size)).toEqual([first.length, second.length]);
    expect(seen[0]!.response).toEqual({ raw: Buffer.from(answer1), size: answer1.length });
    expect(seen[1]!.response!.raw.toString('latin1')).toBe(answer2.slice(0, 50));
    expect(seen[1]!.response!.size).toBe(answer2.length);
  });

  it('keeps nothing without a capture limit', () => {
    const seen: HttpExchange[] = [];
    const observer = new HttpObserver('203.0.113.7:4000', (x) => seen.push(x));
    observer.request(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
    observer.response(Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'));
    expect(seen[0]!.request).toBeUndefined();
    expect(seen[0]!.response).toBeUndefined();
  });
});
