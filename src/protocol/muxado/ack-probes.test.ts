import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { captured, nextEvent, socketPair, until } from '../../../test/support/mux.js';
import { FrameFlag, decodeFrames, encodeData, encodeWndInc } from './frame.js';
import { MuxSession } from './session.js';
import type { MuxStream } from './stream.js';

const cleanup: (MuxSession | net.Socket)[] = [];
afterEach(() => {
  for (const item of cleanup.splice(0)) item.destroy();
});

/** A server session (ACK probes on or off) with a raw peer that opened stream 3. */
async function peerWithStream(ackProbes: boolean) {
  const [raw, mine] = await socketPair();
  const session = new MuxSession(mine, { role: 'server', ackProbes });
  cleanup.push(session, raw);
  const received = captured(raw);
  const opened = nextEvent<MuxStream>(session, 'stream');
  // An empty SYN: the stream owes no credit, and a zero-length frame asks for no probe.
  raw.write(encodeData(3, Buffer.alloc(0), FrameFlag.Syn));
  const stream = await opened;
  stream.resume();
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(decodeFrames(received.bytes())).toEqual([]);
  return { session, raw, received, stream };
}

const frames = (bytes: Buffer) => decodeFrames(bytes);
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

describe('ACK probes: a small read is answered at once so a Nagle-bound peer never waits', () => {
  it('answers a WNDINC with an empty DATA frame on that stream', async () => {
    const { raw, received } = await peerWithStream(true);
    raw.write(encodeWndInc(3, 7));
    await until(() => frames(received.bytes()).length > 0);
    expect(frames(received.bytes())).toEqual([
      expect.objectContaining({ type: 'data', streamId: 3, flags: 0, payload: Buffer.alloc(0) }),
    ]);
  });

  it('answers small DATA with the credit it owes (never a zero WNDINC, which Go refuses)', async () => {
    const { raw, received } = await peerWithStream(true);
    raw.write(encodeData(3, Buffer.from('more of the request')));
    await until(() => frames(received.bytes()).length > 0);
    const [probe] = frames(received.bytes());
    expect(probe).toEqual({ type: 'wndinc', streamId: 3, increment: 19 });
  });

  it('writes no probe when the turn writes something anyway', async () => {
    const { raw, received, stream } = await peerWithStream(true);
    stream.on('data', () => stream.write('response'));
    raw.write(encodeData(3, Buffer.from('next request')));
    await until(() => frames(received.bytes()).some((f) => f.type === 'data'));
    await settle();
    const data = frames(received.bytes()).filter((f) => f.type === 'data');
    expect(data).toHaveLength(1);
    expect((data[0] as { payload: Buffer }).payload.toString()).toBe('response');
  });

  it('writes no probe when anything goes out after the read, before the loop turns', async () => {
    const { session, raw, received } = await peerWithStream(true);
    const other = session.openStream();
    // A write of a later turn of the same loop iteration (as when the requests of other public
    // connections are read in it) acknowledges the peer's data as well as a probe would.
    const mine = (session as unknown as { transport: net.Socket }).transport;
    mine.once('data', () => process.nextTick(() => other.write('another request')));
    raw.write(encodeWndInc(3, 7));
    await until(() => frames(received.bytes()).some((f) => f.type === 'data'));
    await settle();
    const data = frames(received.bytes()).filter((f) => f.type === 'data');
    expect(data).toHaveLength(1);
    expect((data[0] as { payload: Buffer }).payload.toString()).toBe('another request');
    expect(session.ackProbesWritten).toBe(0);
  });

  it('stops probing a stream that sends nothing after four probes, until it sends data again', async () => {
    const { session, raw, received, stream } = await peerWithStream(true);
    const probes = () => frames(received.bytes()).filter((f) => f.type === 'data').length;
    // A peer that answers every probe with a small frame (a WNDINC) is not probed back for ever.
    for (let i = 0; i < 10; i++) {
      raw.write(encodeWndInc(3, 1));
      await settle();
    }
    expect(probes()).toBe(4);
    expect(session.ackProbesWritten).toBe(4);
    stream.write('an answer');
    await until(() => probes() === 5);
    received.clear();
    raw.write(encodeWndInc(3, 1));
    await until(() => frames(received.bytes()).length > 0);
    expect(frames(received.bytes())).toEqual([
      expect.objectContaining({ type: 'data', streamId: 3, payload: Buffer.alloc(0) }),
    ]);
  });

  it('writes nothing on a stream we finished, nor when probes are off, nor for a FIN', async () => {
    const finished = await peerWithStream(true);
    finished.stream.end();
    await until(() =>
      frames(finished.received.bytes()).some(
        (f) => f.type === 'data' && (f.flags & FrameFlag.Fin) !== 0,
      ),
    );
    finished.received.clear();
    finished.raw.write(encodeWndInc(3, 7));
    await settle();
    // No DATA after our FIN (a protocol error); the stream owes no credit either.
    expect(frames(finished.received.bytes())).toEqual([]);

    const off = await peerWithStream(false);
    off.raw.write(encodeWndInc(3, 7));
    await settle();
    expect(frames(off.received.bytes())).toEqual([]);

    const fin = await peerWithStream(true);
    fin.raw.write(encodeData(3, Buffer.alloc(0), FrameFlag.Fin));
    await settle();
    expect(frames(fin.received.bytes()).filter((f) => f.type === 'data')).toEqual([]);
  });
});
