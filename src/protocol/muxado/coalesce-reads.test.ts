import { createHash, randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { readAll, sessionPair } from '../../../test/support/mux.js';
import { encodeFrameHeader, FrameFlag, FrameType } from './frame.js';
import { MuxSession } from './session.js';
import type { MuxStream } from './stream.js';

const sessions: MuxSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.destroy();
});

const sha = (buf: Buffer): string => createHash('sha256').update(buf).digest('hex');

/** A session reading from a PassThrough, fed by hand: what one turn of reads brings. */
function fedSession(): { session: MuxSession; feed: (chunk: Buffer) => void; end: () => void } {
  const transport = new PassThrough();
  const session = new MuxSession(transport, { role: 'server', coalesceReads: true });
  sessions.push(session);
  return {
    session,
    feed: (chunk) => transport.emit('data', chunk),
    end: () => transport.emit('end'),
  };
}

/** A DATA frame (header and payload) in one buffer. */
function dataFrame(id: number, payload: Buffer, flags = 0): Buffer {
  const frame = Buffer.alloc(8 + payload.length);
  encodeFrameHeader(FrameType.Data, flags, id, payload.length, frame);
  payload.copy(frame, 8);
  return frame;
}

describe('MuxSession with coalesceReads', () => {
  it('joins reads contiguous in memory: a stream gets a frame in one piece', async () => {
    const { session, feed } = fedSession();
    const payload = randomBytes(64 * 1024);
    const wire = dataFrame(3, payload, FrameFlag.Syn | FrameFlag.Fin);
    const pieces: Buffer[] = [];
    const got = new Promise<MuxStream>((resolve) => session.once('stream', resolve));
    // As TLS records read into one slab: views of one buffer, each after the last.
    for (let at = 0; at < wire.length; at += 16 * 1024) feed(wire.subarray(at, at + 16 * 1024));
    const stream = await got;
    stream.on('data', (chunk: Buffer) => pieces.push(chunk));
    await new Promise((resolve) => stream.once('end', resolve));
    expect(pieces).toHaveLength(1);
    expect(pieces[0]!.equals(payload)).toBe(true);
  });

  it('keeps reads that are not contiguous apart, in order', async () => {
    const { session, feed } = fedSession();
    const a = randomBytes(1000);
    const b = randomBytes(2000);
    const got = new Promise<MuxStream>((resolve) => session.once('stream', resolve));
    feed(Buffer.from(dataFrame(3, a, FrameFlag.Syn)));
    feed(Buffer.from(dataFrame(3, b, FrameFlag.Fin)));
    const stream = await got;
    expect((await readAll(stream)).equals(Buffer.concat([a, b]))).toBe(true);
  });

  it('parses what was read before the transport ended', async () => {
    const { session, feed, end } = fedSession();
    const payload = randomBytes(5000);
    const parts: Buffer[] = [];
    let opened = 0;
    session.on('stream', (s: MuxStream) => {
      opened++;
      s.on('data', (chunk: Buffer) => parts.push(chunk));
    });
    feed(dataFrame(3, payload, FrameFlag.Syn));
    expect(opened).toBe(0); // not parsed yet: it waits for the check phase
    end();
    expect(opened).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(Buffer.concat(parts).equals(payload)).toBe(true);
    expect(session.closed).toBe(true);
  });

  it('carries bulk both ways between two sessions that coalesce', async () => {
    const { client, server } = await sessionPair({ coalesceReads: true });
    sessions.push(client, server);
    server.on('stream', (s: MuxStream) => s.pipe(s));
    const data = randomBytes(8 * 1024 * 1024 + 3);
    const stream = client.openStream();
    const back = readAll(stream);
    stream.end(data);
    expect(sha(await back)).toBe(sha(data));
  });

  it('copies a small chunk that waits in a paused stream out of its large read buffer', async () => {
    const { session, feed } = fedSession();
    const slab = Buffer.alloc(256 * 1024);
    const frame = dataFrame(3, Buffer.from('small'), FrameFlag.Syn);
    frame.copy(slab);
    const got = new Promise<MuxStream>((resolve) => session.once('stream', resolve));
    feed(slab.subarray(0, frame.length));
    const stream = await got; // nobody reads it yet: the chunk waits in its buffer
    const chunk = stream.read() as Buffer;
    expect(chunk.toString()).toBe('small');
    expect(chunk.buffer).not.toBe(slab.buffer);
  });
});
