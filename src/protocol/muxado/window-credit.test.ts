import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { captured, nextEvent, socketPair, until } from '../../../test/support/mux.js';
import { FrameFlag, decodeFrames, encodeData } from './frame.js';
import { MuxSession } from './session.js';
import type { MuxStream } from './stream.js';

const cleanup: (MuxSession | net.Socket)[] = [];
afterEach(() => {
  for (const item of cleanup.splice(0)) item.destroy();
});

/** A server session with a 32 KiB window (credit in batches of 8 KiB) and a raw peer. */
async function rawPeer() {
  const [raw, mine] = await socketPair();
  const session = new MuxSession(mine, { role: 'server', window: 32 * 1024 });
  cleanup.push(session, raw);
  return { session, raw, received: captured(raw) };
}

const increments = (bytes: Buffer, streamId: number): number[] =>
  decodeFrames(bytes).flatMap((f) =>
    f.type === 'wndinc' && f.streamId === streamId ? [f.increment] : [],
  );

describe('MuxStream window credit', () => {
  it('credits what one turn consumed with one WNDINC, not one per batch crossed', async () => {
    const { session, raw, received } = await rawPeer();
    const piece = Buffer.alloc(8 * 1024, 0x61);
    const opened = nextEvent<MuxStream>(session, 'stream');
    // Four frames of one batch each, in one write: read in one turn (one or two socket reads).
    raw.write(
      Buffer.concat([
        encodeData(3, piece, FrameFlag.Syn),
        encodeData(3, piece),
        encodeData(3, piece),
        encodeData(3, piece),
      ]),
    );
    const stream = await opened;
    let got = 0;
    stream.on('data', (chunk: Buffer) => (got += chunk.length));
    await until(() => got === 32 * 1024);
    await until(() => increments(received.bytes(), 3).reduce((a, b) => a + b, 0) === got);
    // One per 8 KiB crossed would be four.
    expect(increments(received.bytes(), 3).length).toBeLessThan(4);
    expect(stream.receiveBuffered).toBe(0);
  });

  it('credits a paused reader only as it reads, each WNDINC at least a batch', async () => {
    const { session, raw, received } = await rawPeer();
    const opened = nextEvent<MuxStream>(session, 'stream');
    raw.write(encodeData(3, Buffer.alloc(32 * 1024, 0x62), FrameFlag.Syn));
    const stream = await opened;
    await until(() => stream.readableLength === 32 * 1024);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(increments(received.bytes(), 3)).toEqual([]); // nothing consumed, nothing credited
    expect(stream.receiveCapacity).toBe(0);
    stream.read(4 * 1024); // half a batch: still nothing owed
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(increments(received.bytes(), 3)).toEqual([]);
    stream.read(12 * 1024);
    await until(() => increments(received.bytes(), 3).length === 1);
    expect(increments(received.bytes(), 3)).toEqual([16 * 1024]);
    expect(stream.receiveCapacity).toBe(16 * 1024);
  });

  it('sends no credit for a stream reset before its turn', async () => {
    const { session, raw, received } = await rawPeer();
    const opened = nextEvent<MuxStream>(session, 'stream');
    raw.write(encodeData(3, Buffer.alloc(16 * 1024, 0x63), FrameFlag.Syn));
    const stream = await opened;
    await until(() => stream.readableLength === 16 * 1024);
    stream.read(16 * 1024); // a WNDINC is now queued for the turn…
    stream.destroy(); // …and the RST follows it in the same turn
    await until(() => decodeFrames(received.bytes()).some((f) => f.type === 'rst'));
    expect(increments(received.bytes(), 3)).toEqual([]);
  });
});
