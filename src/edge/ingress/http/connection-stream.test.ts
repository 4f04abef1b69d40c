/**
 * ConnectionStream's hold on a tunnel stream, alone: the response body chunks one turn brings go
 * to the client in one write (the public socket is corked until the next tick).
 */
import { Duplex, PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { ChunkedFramer, LengthFramer } from './body-framing.js';
import { ConnectionStream } from './connection-stream.js';
import type { Exchange } from './exchange.js';
import type { HttpRelayContext } from './http-relay.js';

/**
 * A public socket that records each write it makes (one entry per write or writev); with
 * `slow`, a write completes only when `finish()` is called, as a socket the kernel did not
 * take everything from.
 */
class RecordingSocket extends Duplex {
  readonly writes: Buffer[][] = [];
  private pending: (() => void)[] = [];
  constructor(private readonly slow = false) {
    super();
  }
  override _read(): void {}
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.writes.push([chunk]);
    this.complete(cb);
  }
  override _writev(chunks: { chunk: Buffer }[], cb: () => void): void {
    this.writes.push(chunks.map((c) => c.chunk));
    this.complete(cb);
  }
  finish(): void {
    for (const cb of this.pending.splice(0)) cb();
  }
  private complete(cb: () => void): void {
    if (this.slow) this.pending.push(cb);
    else cb();
  }
}

/** A tunnel stream that records the chunks given back to it (as MuxStream.release takes them). */
class ReleasingStream extends PassThrough {
  readonly released: Buffer[] = [];
  release(chunk: Buffer): void {
    this.released.push(chunk);
  }
}

/** The least of a relay connection: it writes what the stream brings to the client. */
class Relay extends ConnectionStream {
  start(exchange: Exchange): void {
    this.exchange = exchange;
    this.sendOnStream(exchange);
  }
  protected send(): void {}
  protected badGateway(): void {}
  protected readonly onStreamData = (chunk: Buffer): void => {
    this.socket.write(chunk);
  };
  protected readonly onStreamEnd = (): void => {};
  protected readonly onStreamClose = (): void => {};
  protected readonly onStreamError = (): void => {};
}

function relayWith(
  stream: PassThrough,
  socket = new RecordingSocket(),
): { relay: Relay; socket: RecordingSocket } {
  const ctx = { pool: { take: () => stream, put: () => undefined } } as unknown as HttpRelayContext;
  return { relay: new Relay(socket, ctx), socket };
}

const tunnel = { proxyProto: false } as unknown as OnlineTunnel;
const tick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));

describe('ConnectionStream', () => {
  it('writes the body chunks of one turn to the client in one write', async () => {
    const stream = new PassThrough();
    const { relay, socket } = relayWith(stream);
    relay.start({ tunnel, responseBody: {} } as unknown as Exchange);
    const chunks = [1, 2, 3, 4, 5].map((n) => Buffer.alloc(8192, n));
    for (const chunk of chunks) stream.emit('data', chunk);
    expect(socket.writes).toHaveLength(0);
    await tick();
    expect(socket.writes).toHaveLength(1);
    expect(Buffer.concat(socket.writes[0]!).equals(Buffer.concat(chunks))).toBe(true);
    // The next turn's chunks are a write of their own.
    stream.emit('data', Buffer.from('more'));
    await tick();
    expect(socket.writes).toHaveLength(2);
  });

  it('leaves what comes before the response body (its head) uncorked', async () => {
    const stream = new PassThrough();
    const { relay, socket } = relayWith(stream);
    relay.start({ tunnel } as unknown as Exchange);
    stream.emit('data', Buffer.from('HTTP/1.1 200 OK\r\n\r\n'));
    expect(socket.writes).toHaveLength(1);
  });

  it('releases body chunks to their stream once the socket has written them all through', async () => {
    const stream = new ReleasingStream();
    const { relay } = relayWith(stream);
    relay.start({ tunnel, responseBody: new LengthFramer(1 << 20) } as unknown as Exchange);
    const chunks = [Buffer.alloc(100, 1), Buffer.alloc(200, 2)];
    for (const chunk of chunks) stream.emit('data', chunk);
    expect(stream.released).toHaveLength(0); // still in the corked socket
    await tick();
    expect(stream.released).toEqual(chunks);
    expect(stream.released[0]).toBe(chunks[0]);
  });

  it('releases nothing the socket still holds after the write', async () => {
    const stream = new ReleasingStream();
    const socket = new RecordingSocket(true);
    const { relay } = relayWith(stream, socket);
    relay.start({ tunnel, responseBody: new LengthFramer(1 << 20) } as unknown as Exchange);
    stream.emit('data', Buffer.alloc(100));
    await tick();
    socket.finish();
    await tick();
    expect(stream.released).toHaveLength(0);
  });

  it.each([
    ['a chunked body (the framer keeps state between chunks)', { framer: 'chunked' }],
    ['a body the inspector captures', { bodies: {} }],
    ['a body a policy transforms', { transforms: {} }],
  ])('releases nothing of %s', async (_name, extra) => {
    const stream = new ReleasingStream();
    const { relay } = relayWith(stream);
    const responseBody = 'framer' in extra ? new ChunkedFramer() : new LengthFramer(1 << 20);
    relay.start({ tunnel, responseBody, ...extra } as unknown as Exchange);
    stream.emit('data', Buffer.alloc(100));
    await tick();
    expect(stream.released).toHaveLength(0);
  });
});
