import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startHelloCapture,
  type HelloCapture,
} from '../../../test/support/client-hello-capture.js';
import { MAX_CLIENT_HELLO_BYTES, scanClientHello } from './client-hello.js';

let hellos: HelloCapture;

/** The first bytes a real Node TLS client sends (its ClientHello record). */
function captureHello(servername: string | undefined): Promise<Buffer> {
  return hellos.capture(servername ? { servername } : {});
}

/** The same handshake bytes re-framed into records of at most `size` bytes each. */
function reframe(record: Buffer, size: number): Buffer {
  const body = record.subarray(5);
  const parts: Buffer[] = [];
  for (let i = 0; i < body.length; i += size) {
    const piece = body.subarray(i, i + size);
    const header = Buffer.from([0x16, record[1]!, record[2]!, 0, 0]);
    header.writeUInt16BE(piece.length, 3);
    parts.push(header, piece);
  }
  return Buffer.concat(parts);
}

beforeAll(async () => {
  hellos = await startHelloCapture();
});

afterAll(() => {
  hellos.close();
});

describe('scanClientHello', () => {
  it('reads the server name of a real ClientHello, lowercased', async () => {
    const hello = await captureHello('App.Burrow.Test');
    expect(scanClientHello(hello)).toEqual({ kind: 'hello', serverName: 'app.burrow.test' });
  });

  it('asks for more bytes for every strict prefix', async () => {
    const hello = await captureHello('app.burrow.test');
    for (let n = 0; n < hello.length; n++) {
      expect(scanClientHello(hello.subarray(0, n)).kind).toBe('incomplete');
    }
  });

  it('reports no server name when the client sent none', async () => {
    const hello = await captureHello(undefined);
    expect(scanClientHello(hello)).toEqual({ kind: 'hello', serverName: undefined });
  });

  it('reassembles a ClientHello split over several records', async () => {
    const hello = await captureHello('split.burrow.test');
    const split = reframe(hello, 50);
    expect(split.length).toBeGreaterThan(hello.length);
    expect(scanClientHello(split)).toEqual({ kind: 'hello', serverName: 'split.burrow.test' });
    expect(scanClientHello(split.subarray(0, split.length - 1)).kind).toBe('incomplete');
  });

  it('refuses a ClientHello split into many tiny records, after reading only a few', async () => {
    const hello = await captureHello('tiny.burrow.test');
    const tiny = reframe(hello, 1);
    expect(scanClientHello(tiny)).toEqual({
      kind: 'invalid',
      reason: 'ClientHello split into too many records',
    });
    // Judged from the first records: the rest of a trickle is never waited for.
    expect(scanClientHello(tiny.subarray(0, 6 * 17)).kind).toBe('invalid');
  });

  it('tells plain text from TLS', () => {
    expect(scanClientHello(Buffer.from('GET / HTTP/1.1\r\n'))).toEqual({ kind: 'not-tls' });
  });

  it('refuses malformed and oversized handshakes', async () => {
    const hello = await captureHello('app.burrow.test');
    const notHello = Buffer.from(hello);
    notHello[5] = 0x02; // ServerHello
    expect(scanClientHello(notHello).kind).toBe('invalid');

    const interleaved = Buffer.concat([
      reframe(hello, 50).subarray(0, 55),
      Buffer.from([0x17, 0x03, 0x03, 0x00, 0x01, 0x00]),
    ]);
    expect(scanClientHello(interleaved).kind).toBe('invalid');

    const huge = Buffer.from(hello.subarray(0, 9));
    huge.writeUIntBE(MAX_CLIENT_HELLO_BYTES, 6, 3);
    expect(scanClientHello(huge)).toEqual({ kind: 'invalid', reason: 'ClientHello too large' });

    const truncatedBody = Buffer.from(hello);
    truncatedBody.writeUIntBE(10, 6, 3); // claims a 10-byte ClientHello
    expect(scanClientHello(truncatedBody)).toEqual({
      kind: 'invalid',
      reason: 'truncated ClientHello',
    });
  });
});
