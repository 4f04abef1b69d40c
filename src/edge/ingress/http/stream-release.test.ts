/**
 * releaseStream on real muxado streams over loopback: the peer sees the FIN first (the unmodified
 * @ngrok/ngrok agent closes its service connection on it, not on a RST), then the reset; a FIN
 * held back by unsent bytes (the peer's window shut) does not keep the stream past the grace.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { captured, nextEvent, socketPair } from '../../../../test/support/mux.js';
import { decodeFrames, ErrorCode, FrameFlag } from '../../../protocol/muxado/frame.js';
import { MuxSession } from '../../../protocol/muxado/session.js';
import type { MuxStream } from '../../../protocol/muxado/stream.js';
import { releaseStream } from './stream-release.js';

let sessions: MuxSession[] = [];
afterEach(() => {
  for (const session of sessions) session.destroy();
  sessions = [];
});

/** A stream and its peer, with the bytes the peer's side of the socket received. */
async function openPair(
  window?: number,
): Promise<{ near: MuxStream; far: MuxStream; wire: () => Buffer }> {
  const [a, b] = await socketPair();
  const wire = captured(b);
  const options = window === undefined ? {} : { window };
  const client = new MuxSession(a, { ...options, role: 'client' });
  const server = new MuxSession(b, { ...options, role: 'server' });
  sessions.push(client, server);
  const near = client.openStream();
  const accepted = nextEvent<MuxStream>(server, 'stream');
  near.write('GET / HTTP/1.1\r\n\r\n');
  const far = await accepted;
  far.on('error', () => undefined);
  return { near, far, wire: wire.bytes };
}

describe('releaseStream', () => {
  it('sends FIN, then RST: the FIN is on the wire before the reset', async () => {
    const { near, far, wire } = await openPair();
    far.resume();
    const closed = nextEvent(far, 'close');
    releaseStream(near);
    await closed;
    expect(near.destroyed).toBe(true);
    const frames = decodeFrames(wire()).filter((f) => 'streamId' in f && f.streamId === near.id);
    const fin = frames.findIndex((f) => f.type === 'data' && (f.flags & FrameFlag.Fin) !== 0);
    const rst = frames.findIndex((f) => f.type === 'rst');
    expect(fin).toBeGreaterThanOrEqual(0);
    expect(rst).toBeGreaterThan(fin);
    expect(frames[rst]).toMatchObject({ type: 'rst', code: ErrorCode.StreamCancelled });
  });

  it('resets a stream whose FIN waits behind unsent bytes after the grace', async () => {
    // The peer never reads: the window shuts and the FIN cannot go out.
    const { near, far } = await openPair(64 * 1024);
    far.pause();
    near.write(Buffer.alloc(256 * 1024));
    const closed = nextEvent(far, 'close', 5000);
    releaseStream(near);
    expect(near.destroyed).toBe(false);
    await closed;
    expect(near.destroyed).toBe(true);
  });

  it('destroys at once a stream already ended', async () => {
    const { near } = await openPair();
    near.end();
    await nextEvent(near, 'finish');
    releaseStream(near);
    expect(near.destroyed).toBe(true);
  });
});
