import { createHash, randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { nextEvent, readAll, sessionPair, tlsPair, until } from '../../../test/support/mux.js';
import { MuxError } from './errors.js';
import { ErrorCode, decodeFrames } from './frame.js';
import { MuxSession } from './session.js';
import { BURROW_WINDOW, DEFAULT_WINDOW, windowForAlpn } from './window.js';
import type { MuxStream } from './stream.js';

const sessions: MuxSession[] = [];
async function pair(options: Parameters<typeof sessionPair>[0] = {}) {
  const p = await sessionPair(options);
  sessions.push(p.client, p.server);
  return p;
}
afterEach(() => {
  for (const s of sessions.splice(0)) s.destroy();
});

const sha = (buf: Buffer): string => createHash('sha256').update(buf).digest('hex');
const echo = (stream: MuxStream): void => {
  stream.on('error', () => {});
  stream.pipe(stream);
};

/** Write `data` in 64 KiB pieces honouring back-pressure, then end. */
function send(stream: MuxStream, data: Buffer): void {
  let at = 0;
  const more = (): void => {
    while (at < data.length) {
      const piece = data.subarray(at, at + 65536);
      at += piece.length;
      if (!stream.write(piece)) {
        stream.once('drain', more);
        return;
      }
    }
    stream.end();
  };
  more();
}

describe('MuxSession', () => {
  it('numbers client streams odd from 3 and server streams even from 2', async () => {
    const { client, server } = await pair();
    const seenByServer: number[] = [];
    const seenByClient: number[] = [];
    server.on('stream', (s: MuxStream) => (seenByServer.push(s.id), echo(s)));
    client.on('stream', (s: MuxStream) => (seenByClient.push(s.id), echo(s)));
    const fromClient = [client.openStream(), client.openStream(), client.openStream()];
    const fromServer = [server.openStream(), server.openStream()];
    expect(fromClient.map((s) => s.id)).toEqual([3, 5, 7]);
    expect(fromServer.map((s) => s.id)).toEqual([2, 4]);
    const replies = await Promise.all(
      [...fromClient, ...fromServer].map((s) => (s.end(`hi ${s.id}`), readAll(s))),
    );
    expect(replies.map(String)).toEqual(['hi 3', 'hi 5', 'hi 7', 'hi 2', 'hi 4']);
    expect(seenByServer).toEqual([3, 5, 7]);
    expect(seenByClient).toEqual([2, 4]);
  });

  it('moves 64 MiB each way at once on one stream, intact', async () => {
    const { client, server } = await pair();
    const up = randomBytes(64 * 1024 * 1024);
    const down = randomBytes(64 * 1024 * 1024);
    const serverSide = (async () => {
      const stream = await server.accept();
      send(stream, down);
      return readAll(stream);
    })();
    const stream = client.openStream();
    send(stream, up);
    const [receivedDown, receivedUp] = await Promise.all([readAll(stream), serverSide]);
    expect(sha(receivedUp)).toBe(sha(up));
    expect(sha(receivedDown)).toBe(sha(down));
    await until(() => client.streamCount === 0 && server.streamCount === 0);
  }, 60_000);

  it.each(['client to server', 'server to client'])(
    'holds a slow reader to one window and pushes back on the writer (%s)',
    async (direction) => {
      const { client, server } = await pair();
      const data = randomBytes(4 * 1024 * 1024);
      const [opener, acceptor] =
        direction === 'client to server' ? [client, server] : [server, client];
      const writer = opener.openStream();
      const accepted = acceptor.accept();
      // A writer that honours back-pressure: it stops whenever write() returns false.
      let taken = 0;
      let waitingForDrain = false;
      const pump = (): void => {
        waitingForDrain = false;
        while (taken < data.length) {
          const piece = data.subarray(taken, taken + 65536);
          taken += piece.length;
          if (!writer.write(piece)) {
            waitingForDrain = true;
            writer.once('drain', pump);
            return;
          }
        }
        writer.end();
      };
      pump();
      const reader = await accepted; // never read yet: the application is stalled
      await until(() => reader.readableLength === DEFAULT_WINDOW);
      const stalledAt = taken;
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The writer is parked on 'drain' with at most one window plus one chunk taken...
      expect(waitingForDrain).toBe(true);
      expect(taken).toBe(stalledAt);
      expect(taken).toBeLessThanOrEqual(DEFAULT_WINDOW + 2 * 65536);
      expect(writer.sendCapacity).toBe(0);
      // ...and the receiver holds exactly one window, no more.
      expect(reader.readableLength).toBe(DEFAULT_WINDOW);
      expect(reader.receiveBuffered).toBe(DEFAULT_WINDOW);

      // Read slowly: the receiver never holds more than one window, and everything arrives.
      const parts: Buffer[] = [];
      let maxBuffered = 0;
      reader.on('data', (chunk: Buffer) => {
        parts.push(chunk);
        maxBuffered = Math.max(maxBuffered, reader.receiveBuffered, reader.readableLength);
        reader.pause();
        setTimeout(() => reader.resume(), 1);
      });
      await nextEvent(reader, 'end', 30_000);
      expect(maxBuffered).toBeLessThanOrEqual(DEFAULT_WINDOW);
      expect(sha(Buffer.concat(parts))).toBe(sha(data));
    },
    30_000,
  );

  it('interleaves busy streams frame by frame (round-robin)', async () => {
    // A transport that records what the session writes, in order.
    const written: Buffer[] = [];
    const wire = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, cb) {
        written.push(chunk);
        setImmediate(cb);
      },
    });
    const session = new MuxSession(wire, { role: 'client', window: BURROW_WINDOW });
    sessions.push(session);
    const streams = [1, 2, 3].map(() => session.openStream());
    for (const s of streams) s.write(Buffer.alloc(512 * 1024));
    await until(() => decodeFrames(Buffer.concat(written)).length >= 9);
    const order = decodeFrames(Buffer.concat(written))
      .slice(0, 9)
      .map((f) => (f.type === 'data' ? f.streamId : -1));
    expect(order).toEqual([3, 5, 7, 3, 5, 7, 3, 5, 7]);
  });

  it('runs 2,500 concurrent streams, each echoing its own data', async () => {
    const { client, server } = await pair({ maxIncomingStreams: 4096 });
    server.on('stream', echo);
    const count = 2500;
    const streams = Array.from({ length: count }, () => client.openStream());
    const payloads = streams.map(() => randomBytes(1 + Math.floor(Math.random() * 4096)));
    // Every stream is open before any finishes: write now, end later.
    streams.forEach((s, i) => s.write(payloads[i]));
    await until(() => server.streamCount === count);
    const replies = await Promise.all(streams.map((s) => (s.end(), readAll(s))));
    replies.forEach((reply, i) => expect(reply.equals(payloads[i]!)).toBe(true));
    await until(() => client.streamCount === 0 && server.streamCount === 0);
  }, 30_000);

  it.each(['client', 'server'] as const)(
    'a reset from the %s errors the peer stream and the session carries on',
    async (resetter) => {
      const { client, server } = await pair();
      const opened = client.openStream();
      opened.write('hello');
      const accepted = await server.accept();
      const [mine, theirs] = resetter === 'client' ? [opened, accepted] : [accepted, opened];
      const error = nextEvent<MuxError>(theirs, 'error');
      mine.reset(ErrorCode.StreamRefused);
      const err = await error;
      expect(err).toBeInstanceOf(MuxError);
      expect(err.wireCode).toBe(ErrorCode.StreamRefused);
      expect(err.remote).toBe(true);
      expect(client.closed || server.closed).toBe(false);
      // A plain destroy() sends StreamCancelled.
      const second = client.openStream();
      second.write('x');
      const secondAccepted = await server.accept();
      const cancelled = nextEvent<MuxError>(secondAccepted, 'error');
      second.destroy();
      expect((await cancelled).wireCode).toBe(ErrorCode.StreamCancelled);
      server.on('stream', echo);
      const third = client.openStream();
      third.end('still alive');
      expect(String(await readAll(third))).toBe('still alive');
    },
  );

  it('treats RST StreamClosed as a normal close: no error, buffered data still readable', async () => {
    const { client, server } = await pair();
    const stream = client.openStream();
    stream.write('request');
    const accepted = await server.accept();
    accepted.write('response');
    await until(() => stream.readableLength === 8);
    let errored = false;
    stream.on('error', () => (errored = true));
    accepted.reset(ErrorCode.StreamClosed);
    await until(() => client.streamCount === 0);
    expect(stream.write('dropped')).toBe(true);
    expect(String(await readAll(stream))).toBe('response');
    stream.end();
    await nextEvent(stream, 'close');
    expect(errored).toBe(false);
  });

  it('half-closes each direction independently', async () => {
    const { client, server } = await pair();
    const stream = client.openStream();
    stream.end('question');
    const accepted = await server.accept();
    expect(String(await readAll(accepted))).toBe('question');
    accepted.write('answer 1, ');
    await new Promise((resolve) => setTimeout(resolve, 20));
    accepted.end('answer 2');
    expect(String(await readAll(stream))).toBe('answer 1, answer 2');
    await until(() => client.streamCount === 0 && server.streamCount === 0);
    await until(() => stream.destroyed && accepted.destroyed);
  });

  it('refuses streams beyond the accept backlog with AcceptQueueFull', async () => {
    const { client, server } = await pair({ acceptBacklog: 2 });
    const streams = [1, 2, 3].map(() => client.openStream());
    const refused = nextEvent<MuxError>(streams[2]!, 'error');
    streams.forEach((s) => s.write('x'));
    expect((await refused).wireCode).toBe(ErrorCode.AcceptQueueFull);
    expect((await server.accept()).id).toBe(3);
    expect((await server.accept()).id).toBe(5);
  });

  it('refuses streams beyond maxIncomingStreams with StreamRefused', async () => {
    const { client, server } = await pair({ maxIncomingStreams: 2 });
    server.on('stream', () => {});
    const streams = [1, 2, 3].map(() => client.openStream());
    const refused = nextEvent<MuxError>(streams[2]!, 'error');
    streams.forEach((s) => s.write('x'));
    expect((await refused).wireCode).toBe(ErrorCode.StreamRefused);
  });

  it('GOAWAY: the peer hears it, both sides refuse new streams and close', async () => {
    const { client, server } = await pair();
    server.on('stream', (s: MuxStream) => s.on('error', () => {}));
    const open = client.openStream();
    open.write('x');
    await until(() => server.streamCount === 1);
    const openError = nextEvent<MuxError>(open, 'error');
    const goaway = nextEvent(client, 'goaway');
    server.goAway(ErrorCode.EnhanceYourCalm, 'too many requests');
    expect(await goaway).toEqual({
      lastStreamId: 3,
      code: ErrorCode.EnhanceYourCalm,
      message: 'too many requests',
    });
    expect((await openError).wireCode).toBe(ErrorCode.EnhanceYourCalm);
    const reason = await client.wait();
    expect((reason as MuxError).wireCode).toBe(ErrorCode.EnhanceYourCalm);
    expect(((await server.wait()) as MuxError).wireCode).toBe(ErrorCode.EnhanceYourCalm);
    expect(() => client.openStream()).toThrow(MuxError);
    expect(() => server.openStream()).toThrow(MuxError);
    await expect(server.accept()).rejects.toBeInstanceOf(MuxError);
  });

  it('close() ends both sessions; the closer reports no error', async () => {
    const { client, server } = await pair();
    client.close();
    expect(await client.wait()).toBeUndefined();
    expect(((await server.wait()) as MuxError).wireCode).toBe(ErrorCode.RemoteGoneAway);
  });

  it('ends the session when the transport drops; open streams close without ending', async () => {
    const { client, server } = await pair();
    server.on('stream', () => {});
    const stream = client.openStream();
    stream.write('x');
    await until(() => server.streamCount === 1);
    let errored = false;
    stream.on('error', () => (errored = true));
    server.destroy();
    expect(((await client.wait()) as MuxError).wireCode).toBe(ErrorCode.PeerEOF);
    await until(() => stream.destroyed);
    expect(stream.readableEnded).toBe(false);
    expect(errored).toBe(false);
  });

  it('fails open streams with the error when the session fails', async () => {
    const { client, server } = await pair();
    server.on('stream', () => {});
    const stream = client.openStream();
    stream.write('x');
    const failed = nextEvent<Error>(stream, 'error');
    client.destroy(new Error('boom'));
    expect((await failed).message).toBe('boom');
    expect((await client.wait())?.message).toBe('boom');
  });

  it('sends GOAWAY StreamsExhausted when stream ids run out', async () => {
    const { client, server } = await pair();
    (client as unknown as { nextLocalId: number }).nextLocalId = 0x7fffffff;
    const goaway = nextEvent<{ code: number }>(server, 'goaway');
    expect(() => client.openStream()).toThrow(/exhausted/);
    expect((await goaway).code).toBe(ErrorCode.StreamsExhausted);
  });

  it.each([
    ['burrow/1', BURROW_WINDOW],
    ['no ALPN', DEFAULT_WINDOW],
  ])('runs over TLS with the window chosen by ALPN (%s)', async (offer, window) => {
    const [a, b] = await tlsPair(offer === 'burrow/1' ? ['burrow/1'] : []);
    expect(windowForAlpn(b.alpnProtocol)).toBe(window);
    const client = new MuxSession(a, { role: 'client', window: windowForAlpn(a.alpnProtocol) });
    const server = new MuxSession(b, { role: 'server', window: windowForAlpn(b.alpnProtocol) });
    sessions.push(client, server);
    server.on('stream', echo);
    const data = randomBytes(16 * 1024 * 1024);
    const stream = client.openStream();
    expect(stream.window).toBe(window);
    send(stream, data);
    expect(sha(await readAll(stream))).toBe(sha(data));
  });
});
