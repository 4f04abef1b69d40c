import { afterEach, describe, expect, it } from 'vitest';
import {
  captured,
  nextEvent,
  readAll,
  sessionPair,
  socketPair,
  until,
} from '../../../test/support/mux.js';
import type { MuxError } from '../muxado/errors.js';
import { ErrorCode, FrameFlag, decodeFrames, encodeData, encodeWndInc } from '../muxado/frame.js';
import { MuxSession } from '../muxado/session.js';
import type { MuxStream } from '../muxado/stream.js';
import {
  HEARTBEAT_STREAM_TYPE,
  Heartbeat,
  TypedSession,
  echoHeartbeats,
  openTypedStream,
} from './typed.js';

const sessions: MuxSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.destroy();
});
async function pair(options: Parameters<typeof sessionPair>[0] = {}) {
  const p = await sessionPair(options);
  sessions.push(p.client, p.server);
  return p;
}

const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};

describe('typed streams', () => {
  it('sends the type in the SYN frame, with the first payload', async () => {
    const [a, b] = await socketPair();
    const session = new MuxSession(a, { role: 'client' });
    sessions.push(session);
    b.on('error', () => {});
    const wire = captured(b);
    openTypedStream(session, 7, Buffer.from('{"Labels":{}}'));
    await until(() => wire.bytes().length >= 8 + 4 + 13);
    const [first] = decodeFrames(wire.bytes());
    expect(first).toMatchObject({ type: 'data', streamId: 3, flags: FrameFlag.Syn });
    expect(first?.type === 'data' && first.payload).toEqual(
      Buffer.concat([u32(7), Buffer.from('{"Labels":{}}')]),
    );
    b.destroy();
  });

  it('delivers typed streams with their type read off and the rest intact', async () => {
    const { client, server } = await pair();
    const typedServer = new TypedSession(server);
    const seen = nextEvent<MuxStream>(typedServer, 'stream');
    const types: number[] = [];
    typedServer.on('stream', (_s: MuxStream, type: number) => types.push(type));
    const typedClient = new TypedSession(client);
    const stream = typedClient.open(1, Buffer.from('body'));
    stream.end(' and more');
    const accepted = await seen;
    expect(types).toEqual([1]);
    expect(String(await readAll(accepted))).toBe('body and more');
  });

  it('queues typed streams for accept() when nobody listens', async () => {
    const { client, server } = await pair();
    const typedServer = new TypedSession(server);
    const typedClient = new TypedSession(client);
    typedClient.open(0xfffffffe).end();
    typedClient.open(3).end();
    const first = await typedServer.accept();
    const second = await typedServer.accept();
    expect([first.type, second.type]).toEqual([0xfffffffe, 3]);
  });

  it('resets a stream that never sends its type', async () => {
    const { client, server } = await pair();
    new TypedSession(server, { typeTimeoutMs: 50 });
    const stream = client.openStream();
    stream.write('ab'); // half a type
    const err = await nextEvent<MuxError>(stream, 'error');
    expect(err.wireCode).toBe(ErrorCode.Protocol);
  });
});

describe('heartbeat', () => {
  it('is answered by the peer, one echo per nonce, and reports latency', async () => {
    const { client, server } = await pair();
    new TypedSession(server); // answers heartbeats, even with nothing else set up
    const heartbeat = new TypedSession(client).startHeartbeat({ interval: 30, tolerance: 1000 });
    const beats: number[] = [];
    heartbeat.on('beat', (ms: number) => beats.push(ms));
    await until(() => beats.length >= 4);
    heartbeat.stop();
    expect(beats.every((ms) => ms >= 0 && ms < 1000)).toBe(true);
    expect(heartbeat.latency).toBe(beats.at(-1));
    expect(client.closed).toBe(false);
  });

  it('echoes raw nonces exactly, from the first frame', async () => {
    const [a, b] = await socketPair();
    const server = new MuxSession(b, { role: 'server' });
    sessions.push(server);
    new TypedSession(server);
    const wire = captured(a);
    a.write(
      encodeData(3, Buffer.concat([u32(HEARTBEAT_STREAM_TYPE), u32(0xdeadbeef)]), FrameFlag.Syn),
    );
    await until(() => wire.bytes().length >= 12);
    a.write(encodeData(3, u32(0x01020304)));
    await until(() => wire.bytes().length >= 24);
    const frames = decodeFrames(wire.bytes());
    expect(frames).toEqual([
      { type: 'data', streamId: 3, flags: 0, payload: u32(0xdeadbeef) },
      { type: 'data', streamId: 3, flags: 0, payload: u32(0x01020304) },
    ]);
    a.destroy();
  });

  it('echoes a nonce split across frames once it is whole, and reports each chunk', async () => {
    const [a, b] = await socketPair();
    const server = new MuxSession(b, { role: 'server' });
    sessions.push(server);
    let chunks = 0;
    server.on('stream', (stream: MuxStream) => {
      stream.once('data', () => echoHeartbeats(stream, () => chunks++));
    });
    const wire = captured(a);
    a.write(encodeData(3, u32(HEARTBEAT_STREAM_TYPE), FrameFlag.Syn));
    await until(() => server.streamCount === 1);
    a.write(encodeData(3, Buffer.from([1, 2])));
    await until(() => chunks === 1);
    a.write(encodeData(3, Buffer.from([3, 4, 5, 6, 7])));
    await until(() => wire.bytes().length >= 12);
    expect(decodeFrames(wire.bytes())).toEqual([
      { type: 'data', streamId: 3, flags: 0, payload: Buffer.from([1, 2, 3, 4]) },
    ]);
    a.write(encodeData(3, Buffer.from([8])));
    await until(() => wire.bytes().length >= 24);
    expect(decodeFrames(wire.bytes())[1]).toEqual({
      type: 'data',
      streamId: 3,
      flags: 0,
      payload: Buffer.from([5, 6, 7, 8]),
    });
    expect(chunks).toBe(3);
    a.destroy();
  });

  it("answers a peer's credit for an echo with nothing, even with ACK probes on", async () => {
    const [a, b] = await socketPair();
    const server = new MuxSession(b, { role: 'server', ackProbes: true });
    sessions.push(server);
    new TypedSession(server, { answerHeartbeats: false });
    server.on('stream', (stream: MuxStream) => {
      stream.once('data', () => echoHeartbeats(stream));
    });
    const wire = captured(a);
    a.write(encodeData(3, u32(HEARTBEAT_STREAM_TYPE), FrameFlag.Syn));
    await until(() => server.streamCount === 1);
    for (const nonce of [1, 2, 3]) {
      a.write(encodeData(3, u32(nonce)));
      await until(() => wire.bytes().length >= 12 * nonce);
      // What ngrok's agents do after reading each echo: credit its 4 bytes at once.
      a.write(encodeWndInc(3, 4));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    // From the first echo on, only the echoes: no ACK probe (an empty DATA frame or a WNDINC)
    // answers the credits. (The SYN frame, read before the stream was known as a heartbeat, may
    // have had its probe.)
    const frames = decodeFrames(wire.bytes());
    expect(frames.slice(frames.findIndex((f) => f.type === 'data'))).toEqual(
      [1, 2, 3].map((n) => ({ type: 'data', streamId: 3, flags: 0, payload: u32(n) })),
    );
    a.destroy();
  });

  it('holds a peer that sends nonces and never reads the echoes to its windows', async () => {
    const { client, server } = await pair();
    new TypedSession(server);
    const stream = openTypedStream(client, HEARTBEAT_STREAM_TYPE);
    stream.on('error', () => {});
    stream.pause(); // never read the echoes
    const nonces = Buffer.alloc(64 * 1024, 7);
    let sent = 0;
    // Write for a second, as fast as the session lets us.
    const until = Date.now() + 1000;
    while (Date.now() < until) {
      sent += nonces.length;
      if (!stream.write(nonces)) {
        await Promise.race([
          new Promise((resolve) => stream.once('drain', resolve)),
          new Promise((resolve) => setTimeout(resolve, 50)),
        ]);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    sent -= stream.writableLength; // what never left our side
    // Without back-pressure the echoing side would take everything we write (megabytes queued
    // as echoes); with it, at most our window of nonces plus its window of echoes gets through.
    expect(sent).toBeLessThan(4 * client.window);
    expect(server.closed).toBe(false);
  });

  it('declares the session dead when echoes stop (interval + tolerance)', async () => {
    const { client, server } = await pair();
    // A peer that accepts the heartbeat stream but never answers it.
    new TypedSession(server, { answerHeartbeats: false }).on('stream', () => {});
    const heartbeat = new Heartbeat(client, { interval: 40, tolerance: 60 });
    const started = Date.now();
    const timedOut = nextEvent(heartbeat, 'timeout', 2000);
    heartbeat.start();
    await timedOut;
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(90);
    const reason = (await client.wait()) as MuxError;
    expect(reason.message).toMatch(/heartbeat/);
  });

  it('works from the server side too (the edge measuring an agent)', async () => {
    const { client, server } = await pair();
    new TypedSession(client); // the agent's responder
    const heartbeat = new TypedSession(server).startHeartbeat({ interval: 20, tolerance: 500 });
    await nextEvent(heartbeat, 'beat');
    heartbeat.stop();
    expect(heartbeat.latency).toBeGreaterThanOrEqual(0);
  });
});
