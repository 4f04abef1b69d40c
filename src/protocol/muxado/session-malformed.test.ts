import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  captured,
  nextEvent,
  readAll,
  sessionPair,
  socketPair,
  until,
} from '../../../test/support/mux.js';
import { MuxError } from './errors.js';
import {
  ErrorCode,
  FrameFlag,
  FrameType,
  decodeFrames,
  encodeData,
  encodeFrameHeader,
  encodeGoAway,
  encodeRst,
  encodeWndInc,
} from './frame.js';
import { MuxSession } from './session.js';
import type { MuxStream } from './stream.js';

/** A session under test (`role`) whose peer is a raw socket we write arbitrary bytes to. */
async function rawPeer(role: 'client' | 'server', options: { window?: number } = {}) {
  const [a, b] = await socketPair();
  const [raw, mine] = role === 'server' ? [a, b] : [b, a];
  const session = new MuxSession(mine, { role, ...options });
  cleanup.push(session, raw);
  const received = captured(raw);
  const closed = new Promise<void>((resolve) => raw.once('close', () => resolve()));
  return { session, raw, received, closed };
}
const cleanup: (MuxSession | net.Socket)[] = [];
afterEach(() => {
  for (const item of cleanup.splice(0)) item.destroy();
});

const syn = (id: number, body = 'x'): Buffer => encodeData(id, Buffer.from(body), FrameFlag.Syn);

describe('MuxSession with a misbehaving peer', () => {
  it.each([
    ['an unknown frame type', [encodeFrameHeader(0x9, 0, 3, 0)], ErrorCode.Protocol],
    [
      'RST with the wrong length',
      [syn(3), encodeFrameHeader(FrameType.Rst, 0, 3, 2), Buffer.alloc(2)],
      ErrorCode.FrameSize,
    ],
    [
      'WNDINC of 0',
      [syn(3), encodeFrameHeader(FrameType.WndInc, 0, 3, 4), Buffer.alloc(4)],
      ErrorCode.Protocol,
    ],
    ['DATA on stream 0', [encodeData(0, Buffer.from('x'))], ErrorCode.Protocol],
    ['a SYN with the server parity', [syn(2)], ErrorCode.Protocol],
    ['a SYN reusing an old stream id', [syn(5), syn(3)], ErrorCode.Protocol],
    [
      'a window overrun',
      [syn(3, 'a'.repeat(600)), encodeData(3, Buffer.alloc(600))],
      ErrorCode.FlowControl,
    ],
    [
      'GOAWAY on a stream',
      [encodeFrameHeader(FrameType.GoAway, 0, 3, 8), Buffer.alloc(8)],
      ErrorCode.Protocol,
    ],
    [
      'a WNDINC overflowing the send window',
      [syn(3), encodeWndInc(3, 0x7fffffff)],
      ErrorCode.FlowControl,
    ],
  ])('answers %s with GOAWAY and closes; the process lives', async (_name, frames, code) => {
    const { session, raw, received, closed } = await rawPeer('server', { window: 1024 });
    session.on('stream', (s: MuxStream) => s.on('error', () => {})); // never read
    raw.write(Buffer.concat(frames));
    const reason = (await session.wait()) as MuxError;
    expect(reason).toBeInstanceOf(MuxError);
    expect(reason.wireCode).toBe(code);
    await closed;
    const goAway = decodeFrames(received.bytes()).at(-1);
    expect(goAway).toMatchObject({ type: 'goaway', code });
    // A fresh session on the same process works.
    const { client, server } = await sessionPair();
    cleanup.push(client, server);
    server.on('stream', (s: MuxStream) => s.pipe(s));
    const stream = client.openStream();
    stream.end('alive');
    expect(String(await readAll(stream))).toBe('alive');
  });

  it.each([
    ['queued for accept()', false],
    ["handed to a 'stream' listener that ignores errors", true],
  ])(
    'refuses a SYN longer than the window before opening its stream (%s); the process lives',
    async (_name, listening) => {
      const { session, raw, received, closed } = await rawPeer('server', { window: 1024 });
      // A listener that never handles 'error': an allocated stream failing would crash the run.
      const opened: MuxStream[] = [];
      if (listening) session.on('stream', (s: MuxStream) => opened.push(s));
      const header = encodeFrameHeader(FrameType.Data, FrameFlag.Syn, 3, 0xffffff);
      raw.write(Buffer.concat([header, Buffer.alloc(2048)]));
      const reason = (await session.wait()) as MuxError;
      expect(reason.wireCode).toBe(ErrorCode.FlowControl);
      await closed;
      expect(decodeFrames(received.bytes()).at(-1)).toMatchObject({
        type: 'goaway',
        code: ErrorCode.FlowControl,
      });
      expect(opened).toEqual([]);
      expect(session.streamCount).toBe(0);
    },
  );

  it('closes streams never taken from the accept queue without an error nobody hears', async () => {
    const { session, raw } = await rawPeer('server', { window: 1024 });
    raw.write(syn(3, 'queued'));
    await until(() => session.streamCount === 1);
    raw.write(Buffer.from('garbage that fails the session'));
    const reason = (await session.wait()) as MuxError;
    expect(reason.wireCode).toBe(ErrorCode.Protocol);
    await expect(session.accept()).rejects.toThrow();
  });

  it('fails streams that are open when the peer sends garbage', async () => {
    const { session, raw } = await rawPeer('server');
    raw.write(syn(3, 'hello'));
    const stream = await session.accept();
    const failed = nextEvent<MuxError>(stream, 'error');
    raw.write(Buffer.from('this is not muxado at all'));
    expect((await failed).wireCode).toBe(ErrorCode.Protocol);
  });

  it('answers data on an unknown stream with RST StreamClosed and ignores a bare FIN', async () => {
    const { session, raw, received } = await rawPeer('server');
    raw.write(encodeData(7, Buffer.alloc(0), FrameFlag.Fin));
    raw.write(encodeData(9, Buffer.from('late')));
    await until(() => received.bytes().length >= 12);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(decodeFrames(received.bytes())).toEqual([
      { type: 'rst', streamId: 9, code: ErrorCode.StreamClosed },
    ]);
    expect(session.closed).toBe(false);
  });

  it('resets a stream that receives data after its FIN', async () => {
    const { session, raw, received } = await rawPeer('server');
    session.on('stream', (s: MuxStream) => s.on('error', () => {}));
    raw.write(encodeData(3, Buffer.from('a'), FrameFlag.Syn | FrameFlag.Fin));
    raw.write(encodeData(3, Buffer.from('b')));
    await until(() => received.bytes().length >= 12);
    expect(decodeFrames(received.bytes())).toEqual([
      { type: 'rst', streamId: 3, code: ErrorCode.StreamClosed },
    ]);
    expect(session.closed).toBe(false);
  });

  it('on GOAWAY fails our streams above last-stream-id with RemoteGoneAway, then closes', async () => {
    const { session, raw } = await rawPeer('client');
    const processed = session.openStream();
    const unprocessed = session.openStream();
    processed.write('a');
    unprocessed.write('b');
    processed.on('error', () => {});
    const gone = nextEvent<MuxError>(unprocessed, 'error');
    await new Promise((resolve) => setTimeout(resolve, 20));
    raw.write(Buffer.concat([encodeGoAway(3, ErrorCode.None, 'draining'), encodeRst(3, 1)]));
    expect((await gone).wireCode).toBe(ErrorCode.RemoteGoneAway);
    const reason = (await session.wait()) as MuxError;
    expect(reason.wireCode).toBe(ErrorCode.RemoteGoneAway);
    expect(session.remoteGoAway).toEqual({ lastStreamId: 3, code: 0, message: 'draining' });
    // The RST after the GOAWAY was never parsed: stream 3 just closed.
    await until(() => processed.destroyed);
    expect(processed.errored).toBeNull();
  });

  it('sends nothing for a stream dropped before its first write; FIN rides on end(data)', async () => {
    const { session, received } = await rawPeer('client');
    session.openStream().destroy();
    const used = session.openStream();
    used.end('x');
    await until(() => received.bytes().length > 0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    // end(data) puts SYN, data and FIN in one frame.
    expect(decodeFrames(received.bytes())).toEqual([
      {
        type: 'data',
        streamId: 5,
        flags: FrameFlag.Syn | FrameFlag.Fin,
        payload: Buffer.from('x'),
      },
    ]);
    // A later end() sends an empty FIN.
    const later = session.openStream();
    later.write('y');
    await until(() => decodeFrames(received.bytes()).length === 2);
    later.end();
    await until(() => decodeFrames(received.bytes()).length === 3);
    expect(decodeFrames(received.bytes()).slice(1)).toEqual([
      { type: 'data', streamId: 7, flags: FrameFlag.Syn, payload: Buffer.from('y') },
      { type: 'data', streamId: 7, flags: FrameFlag.Fin, payload: Buffer.alloc(0) },
    ]);
  });
});
