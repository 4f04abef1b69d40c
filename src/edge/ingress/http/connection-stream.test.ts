/**
 * ConnectionStream's hold on a tunnel stream, alone: the response body chunks one turn brings go
 * to the client in one write (the public socket is corked until the next tick).
 */
import { Duplex, PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { ConnectionStream } from './connection-stream.js';
import type { Exchange } from './exchange.js';
import type { HttpRelayContext } from './http-relay.js';

/** A public socket that records each write it makes: one entry per write or writev. */
class RecordingSocket extends Duplex {
  readonly writes: Buffer[][] = [];
  override _read(): void {}
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.writes.push([chunk]);
    cb();
  }
  override _writev(chunks: { chunk: Buffer }[], cb: () => void): void {
    this.writes.push(chunks.map((c) => c.chunk));
    cb();
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

function relayWith(stream: PassThrough): { relay: Relay; socket: RecordingSocket } {
  const socket = new RecordingSocket();
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
});
