import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../../../test/support/mux.js';
import { encodeFrameHeader, FrameFlag, FrameType } from './frame.js';
import { MuxSession } from './session.js';
import { READ_SLAB_SIZE, readIntoSlabs, SlabLender, slabReads } from './slab-reads.js';
import type { MuxStream } from './stream.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** A server that writes `data` in uneven pieces to each connection, then ends it. */
async function sender(data: Buffer, secure: boolean): Promise<{ port: number; cert: Buffer }> {
  const { key, cert } = secure ? selfSignedCert() : { key: Buffer.alloc(0), cert: Buffer.alloc(0) };
  const onConnection = (socket: net.Socket): void => {
    socket.on('error', () => undefined);
    let at = 0;
    let size = 1;
    while (at < data.length) {
      socket.write(data.subarray(at, at + size));
      at += size;
      size = (size * 7 + 13) % 70_000; // 1 byte to ~68 KiB, in no particular rhythm
    }
    socket.end();
  };
  const server = secure
    ? tls.createServer({ key, cert }, onConnection)
    : net.createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, cert };
}

function dial(port: number, cert: Buffer | undefined, onread: net.OnReadOpts): net.Socket {
  const socket = cert
    ? tls.connect({ port, host: '127.0.0.1', ca: cert, onread } as tls.ConnectionOptions)
    : net.connect({ port, host: '127.0.0.1', onread });
  socket.on('error', () => undefined);
  closers.push(() => socket.destroy());
  return socket;
}

describe('slabReads', () => {
  it.each([
    ['TCP', false],
    ['TLS', true],
  ])('delivers every byte over %s, in views of shared slabs, kept intact', async (_n, secure) => {
    const data = randomBytes(3 * 1024 * 1024 + 77);
    const { port, cert } = await sender(data, secure);
    const reads = slabReads();
    const socket = dial(port, secure ? cert : undefined, reads.onread);
    reads.attach(socket);
    // Listen late: what arrives before is held, in order, and the socket waits.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise((resolve) => socket.once('end', resolve));
    // Compared only at the end: had a later read overwritten a kept chunk, this would differ.
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    const slabs = new Set(chunks.map((c) => c.buffer));
    expect(slabs.size).toBeLessThan(chunks.length);
    expect(slabs.size).toBeLessThanOrEqual(Math.ceil(data.length / (READ_SLAB_SIZE / 2)) + 1);
  });

  it('carries a muxado session over TLS', async () => {
    const { key, cert } = selfSignedCert();
    const payload = randomBytes(5 * 1024 * 1024);
    const server = tls.createServer({ key, cert }, (socket) => {
      const session = new MuxSession(socket, { role: 'server' });
      session.on('stream', (stream: MuxStream) => stream.end(payload));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => server.close());
    const reads = slabReads();
    const socket = dial((server.address() as net.AddressInfo).port, cert, reads.onread);
    reads.attach(socket);
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    const session = new MuxSession(socket, { role: 'client' });
    closers.push(() => session.destroy());
    const stream = session.openStream();
    stream.write('go');
    const parts: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => parts.push(chunk));
    await new Promise((resolve) => stream.once('end', resolve));
    expect(Buffer.concat(parts).equals(payload)).toBe(true);
  });

  it('switches a socket a TLS server accepted (readIntoSlabs), bytes intact and in order', async () => {
    const { key, cert } = selfSignedCert();
    const data = randomBytes(3 * 1024 * 1024 + 77);
    const chunks: Buffer[] = [];
    let switched: boolean | undefined;
    const ended = new Promise<void>((resolve) => {
      const server = tls.createServer({ key, cert }, (socket) => {
        socket.on('error', () => undefined);
        switched = readIntoSlabs(socket);
        socket.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          // Pausing and resuming stops and restarts the handle's reads, as with onread.
          if (chunks.length % 50 === 0) {
            socket.pause();
            setTimeout(() => socket.resume(), 5);
          }
        });
        socket.on('end', () => {
          socket.end();
          resolve();
        });
      });
      server.listen(0, '127.0.0.1', () => {
        const port = (server.address() as net.AddressInfo).port;
        const client = tls.connect({ port, host: '127.0.0.1', ca: cert });
        client.on('error', () => undefined);
        closers.push(() => client.destroy());
        let at = 0;
        let size = 1;
        while (at < data.length) {
          client.write(data.subarray(at, at + size));
          at += size;
          size = (size * 7 + 13) % 70_000;
        }
        client.end();
      });
      closers.push(() => server.close());
    });
    await ended;
    expect(switched).toBe(true);
    // Compared only at the end: had a later read overwritten a kept chunk, this would differ.
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    const slabs = new Set(chunks.map((c) => c.buffer));
    expect(slabs.size).toBeLessThanOrEqual(Math.ceil(data.length / (READ_SLAB_SIZE / 2)) + 1);
  });

  it('carries a muxado session whose accepted TLS socket reads into slabs', async () => {
    const payload = randomBytes(5 * 1024 * 1024);
    const received = sendOverTls(payload, (socket) => {
      expect(readIntoSlabs(socket)).toBe(true);
      return new MuxSession(socket, { role: 'server' });
    });
    expect((await received).equals(payload)).toBe(true);
  });

  it("gives a session's reads to its slabSink as ranges, joined, its slabs read into again", async () => {
    const payload = randomBytes(5 * 1024 * 1024);
    let session: MuxSession | undefined;
    let sunk = 0;
    const received = sendOverTls(
      payload,
      (socket) => {
        const lender = new SlabLender();
        session = new MuxSession(socket, { role: 'server', coalesceReads: true, lender });
        const sink = session.slabSink;
        const counting: typeof sink = (slab, start, length) => {
          sunk++;
          sink(slab, start, length);
        };
        expect(readIntoSlabs(socket, READ_SLAB_SIZE, lender, counting)).toBe(true);
        return session;
      },
      (chunk, stream) => {
        const copy = Buffer.from(chunk); // a copy: the chunk itself is given back
        stream.release(chunk);
        return copy;
      },
    );
    expect((await received).equals(payload)).toBe(true);
    expect(sunk).toBeGreaterThan(payload.length / (16 * 1024) - 1); // a call per TLS record
    expect(session!.slabsReused).toBeGreaterThan(0);
  });
});

/**
 * `payload` sent on one stream of a client session over TLS to a server whose session `serve`
 * makes of its socket; resolves with what that stream read, each chunk as `take` keeps it.
 */
function sendOverTls(
  payload: Buffer,
  serve: (socket: tls.TLSSocket) => MuxSession,
  take: (chunk: Buffer, stream: MuxStream) => Buffer = (chunk) => chunk,
): Promise<Buffer> {
  const { key, cert } = selfSignedCert();
  return new Promise<Buffer>((resolve) => {
    const server = tls.createServer({ key, cert }, (socket) => {
      const session = serve(socket);
      closers.push(() => session.destroy());
      session.on('stream', (stream: MuxStream) => {
        const parts: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => parts.push(take(chunk, stream)));
        stream.on('end', () => {
          stream.end('ok');
          resolve(Buffer.concat(parts));
        });
      });
    });
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      const socket = tls.connect({ port, host: '127.0.0.1', ca: cert });
      socket.on('error', () => undefined);
      const client = new MuxSession(socket, { role: 'client' });
      closers.push(() => client.destroy());
      client.openStream().end(payload);
    });
    closers.push(() => server.close());
  });
}

describe('SlabLender', () => {
  const SIZE = 64 * 1024;

  it('reuses a slab only once the reads left it and every view lent was given back', () => {
    const lender = new SlabLender(SIZE);
    const slab = lender.take();
    const a = slab.subarray(0, 100);
    const b = slab.subarray(100, 300);
    expect(lender.lendRead(a)).toBe(true);
    expect(lender.lendRead(b)).toBe(true);
    lender.giveBackRead(a);
    expect(lender.take()).not.toBe(slab); // not left by the reads yet
    lender.leave(slab);
    const other = lender.take();
    expect(other).not.toBe(slab); // b is still out
    lender.giveBackRead(b);
    expect(lender.take()).toBe(slab);
    expect(lender.reused).toBe(1);
    void other;
  });

  it('counts the same bytes lent twice (a read, a DATA chunk in it) until both come back', () => {
    const lender = new SlabLender(SIZE);
    const slab = lender.take();
    const view = slab.subarray(0, 100);
    expect(lender.lendRead(view)).toBe(true); // the read
    expect(lender.lendSlab(slab, 100)).toBe(true); // the same bytes, counted without a view
    lender.leave(slab);
    lender.giveBackRead(view);
    lender.giveBackRead(Buffer.alloc(100)); // not ours: ignored
    expect(lender.take()).not.toBe(slab); // the DATA chunk is still out
    lender.giveBackRead(view);
    expect(lender.take()).toBe(slab);
    expect(lender.lendRead(Buffer.alloc(10))).toBe(false);
    expect(lender.lendSlab(Buffer.alloc(10), 10)).toBe(false);
    expect(lender.lendRead(slab.subarray(0, 0))).toBe(false); // nothing to count
  });

  it('keeps at most maxSpare slabs', () => {
    const lender = new SlabLender(SIZE, 1);
    const slabs = [lender.take(), lender.take(), lender.take()];
    for (const slab of slabs) lender.leave(slab);
    expect(slabs).toContain(lender.take());
    expect(slabs).not.toContain(lender.take());
  });

  it('serves slabReads: a slab is read into again once its reads are given back', async () => {
    const data = randomBytes(2 * 1024 * 1024 + 5);
    const { port } = await sender(data, false);
    const lender = new SlabLender();
    const reads = slabReads(READ_SLAB_SIZE, lender);
    const socket = dial(port, undefined, reads.onread);
    reads.attach(socket);
    const hash = createHash('sha256');
    socket.on('data', (chunk: Buffer) => {
      hash.update(chunk); // used at once, then given back: the bytes may be read over
      lender.giveBackRead(chunk);
    });
    await new Promise((resolve) => socket.once('end', resolve));
    expect(hash.digest('hex')).toBe(createHash('sha256').update(data).digest('hex'));
    expect(lender.reused).toBeGreaterThan(0);
  });
});

describe('DATA chunks lent to streams (MuxSession with a lender)', () => {
  /** A session fed by hand with reads of `slab`; its reads given back once parsed. */
  function fed(lender: SlabLender): { session: MuxSession; feed: (view: Buffer) => void } {
    const transport = new PassThrough();
    const session = new MuxSession(transport, { role: 'server', coalesceReads: true, lender });
    closers.push(() => session.destroy());
    return {
      session,
      feed: (view) => {
        lender.lendRead(view);
        transport.emit('data', view);
      },
    };
  }

  function dataFrame(id: number, payload: string, flags: number): Buffer {
    const frame = Buffer.alloc(8 + payload.length);
    encodeFrameHeader(FrameType.Data, flags, id, payload.length, frame);
    frame.write(payload, 8, 'latin1');
    return frame;
  }

  it('takes a release in the turn that brought the chunk once, and ignores later ones', async () => {
    const lender = new SlabLender(64 * 1024);
    const slab = lender.take();
    const { session, feed } = fed(lender);
    const frame = dataFrame(3, 'hello', FrameFlag.Syn);
    frame.copy(slab);
    const chunks: Buffer[] = [];
    const released = new Promise<MuxStream>((resolve) =>
      session.once('stream', (stream: MuxStream) => {
        stream.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          process.nextTick(() => {
            stream.release(chunk);
            stream.release(chunk); // once too often: ignored
            stream.release(Buffer.from(chunk)); // not what it emitted: ignored
            resolve(stream);
          });
        });
      }),
    );
    const other = slab.subarray(100, 200); // another reader's bytes, still out
    lender.lendRead(other);
    feed(slab.subarray(0, frame.length));
    await released;
    expect(chunks[0]!.buffer).toBe(slab.buffer);
    lender.leave(slab);
    expect(lender.take()).not.toBe(slab); // the other bytes are out: not counted back twice
    lender.giveBackRead(other);
    expect(lender.take()).toBe(slab); // every byte came back, once
  });

  it('keeps a chunk released after the next reads were parsed counted: its slab is not reused', async () => {
    const lender = new SlabLender(64 * 1024);
    const slab = lender.take();
    const { session, feed } = fed(lender);
    const first = dataFrame(3, 'one', FrameFlag.Syn);
    const second = dataFrame(3, 'two', 0);
    first.copy(slab);
    second.copy(slab, first.length);
    const chunks: Buffer[] = [];
    session.once('stream', (stream: MuxStream) => {
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    });
    feed(slab.subarray(0, first.length));
    await new Promise((resolve) => setImmediate(resolve));
    feed(slab.subarray(first.length, first.length + second.length));
    await new Promise((resolve) => setImmediate(resolve));
    expect(chunks.map((c) => c.toString())).toEqual(['one', 'two']);
    const stream = [
      ...(session as unknown as { streams: Map<number, MuxStream> }).streams.values(),
    ][0]!;
    stream.release(chunks[0]!); // too late: the next reads were parsed since
    stream.release(chunks[1]!);
    lender.leave(slab);
    expect(lender.take()).not.toBe(slab);
  });
});
