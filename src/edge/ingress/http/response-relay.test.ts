/**
 * The relay's writes of a response to the client, on an HttpConnection alone (a recording socket,
 * a tunnel stream the test answers on): a response whole in the chunk that brought its head goes
 * out as one buffer; one whose body comes later, head and body in one write on the next tick. And
 * the public socket's read-ahead ticks, off while the relay serves it.
 */
import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { HttpConnection } from './http-connection.js';
import type { HttpRelayContext, LeanRoute } from './http-relay.js';

/** A public socket that records each write it makes (one entry per write or writev). */
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
  setTimeout(): void {}
  /** Everything written, in order, as text. */
  text(): string {
    return Buffer.concat(this.writes.flat()).toString('latin1');
  }
}

/** A tunnel stream: what the relay writes to it goes nowhere; the test emits its answers. */
function tunnelStream(): Duplex {
  return new Duplex({ read() {}, write: (_chunk, _encoding, cb: () => void) => cb() });
}

const tunnel = { proxyProto: false, hostHeaderRewrite: false } as unknown as OnlineTunnel;
const tick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));

/** A connection whose requests all go to `stream`; `counted` gets each status the meter counts. */
function connectionOn(stream: Duplex) {
  const socket = new RecordingSocket();
  const counted: number[] = [];
  const route: LeanRoute = { tunnel, via: [] };
  const ctx = {
    pool: { take: () => stream, put: () => undefined },
    meters: { of: () => ({ request: (status: number) => counted.push(status) }) },
    connections: { attribute: () => undefined, countBytes: () => undefined },
    tap: undefined,
    tracing: () => false,
    maxHeaderBytes: 16 * 1024,
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: 10_000,
    draining: false,
    route: () => route,
    closed: () => undefined,
    h2c: () => undefined,
  } as unknown as HttpRelayContext;
  const connection = new HttpConnection(socket, ctx);
  connection.start();
  const request = (): void => {
    socket.emit('data', Buffer.from('GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n'));
  };
  return { socket, counted, request };
}

const HEAD = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n';

describe('ResponseRelay', () => {
  it('writes a response whole in one chunk as one buffer, and serves the next request', () => {
    const stream = tunnelStream();
    const { socket, counted, request } = connectionOn(stream);
    request();
    stream.emit('data', Buffer.from(HEAD + 'hello'));
    expect(socket.writes).toHaveLength(1);
    expect(socket.writes[0]).toHaveLength(1);
    expect(socket.text()).toBe(HEAD + 'hello');
    expect(counted).toEqual([200]);
    request();
    stream.emit('data', Buffer.from(HEAD + 'again'));
    expect(socket.writes).toHaveLength(2);
    expect(socket.text()).toBe(HEAD + 'hello' + HEAD + 'again');
    expect(counted).toEqual([200, 200]);
    expect(stream.destroyed).toBe(false);
  });

  it('writes a response without a body as its head alone', () => {
    const stream = tunnelStream();
    const { socket, counted, request } = connectionOn(stream);
    request();
    stream.emit('data', Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'));
    expect(socket.text()).toBe('HTTP/1.1 204 No Content\r\n\r\n');
    expect(counted).toEqual([204]);
  });

  it('writes the head and a body that comes in a later chunk of the turn together', async () => {
    const stream = tunnelStream();
    const { socket, counted, request } = connectionOn(stream);
    request();
    stream.emit('data', Buffer.from(HEAD));
    stream.emit('data', Buffer.from('hello'));
    expect(socket.writes).toHaveLength(0);
    await tick();
    expect(socket.writes).toHaveLength(1);
    expect(socket.text()).toBe(HEAD + 'hello');
    expect(counted).toEqual([200]);
  });

  it('passes on only the body of a response followed by more bytes, and drops the stream', () => {
    const stream = tunnelStream();
    const { socket, counted, request } = connectionOn(stream);
    request();
    stream.emit('data', Buffer.from(HEAD + 'hello' + 'HTTP/1.1 200 OK\r\n'));
    expect(socket.text()).toBe(HEAD + 'hello');
    expect(counted).toEqual([200]);
    expect(stream.destroyed).toBe(true);
  });
});

describe('HttpConnection', () => {
  /** Whether Node's Readable would schedule its read-ahead tick after the socket's next read. */
  const readsAhead = (socket: Duplex): boolean =>
    !(socket as unknown as { _readableState: { readingMore: boolean } })._readableState.readingMore;

  it('turns off the read-ahead tick of the socket it serves, and on for whom it hands it to', () => {
    const stream = tunnelStream();
    const { socket, request } = connectionOn(stream);
    expect(readsAhead(socket)).toBe(false);
    // Still off after a request and its answer (reads, pauses and resumes).
    request();
    stream.emit('data', Buffer.from(HEAD + 'hello'));
    expect(readsAhead(socket)).toBe(false);
    // HTTP/2 with prior knowledge: the connection goes to the ingress's HTTP/2 server.
    socket.emit('data', Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
    expect(readsAhead(socket)).toBe(true);
  });
});
