import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { captured, readAll, sessionPair, socketPair, until } from '../../../test/support/mux.js';
import { FrameFlag, decodeFrames, encodeData } from '../muxado/frame.js';
import { StreamType, decodeMessage, type ProxyHeader } from './messages.js';
import {
  MAX_PROXY_HEADER,
  encodeProxyHeader,
  openProxyStream,
  parseProxyHeader,
  readProxyHeader,
} from './proxy-header.js';
import { readExactly, readPrefix } from './reader.js';
import { RpcError, call, notify, readMessage, rpcErrorText, writeReply } from './rpc.js';
import { MuxSession } from '../muxado/session.js';
import type { MuxStream } from '../muxado/stream.js';
import { TypedSession } from './typed.js';

const sessions: MuxSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.destroy();
});
async function typedPair() {
  const { client, server } = await sessionPair();
  sessions.push(client, server);
  return { client, server, agent: new TypedSession(client), edge: new TypedSession(server) };
}

/** Write `bytes` one at a time, each on a later turn of the event loop. */
async function trickle(stream: PassThrough, bytes: Buffer): Promise<void> {
  for (const byte of bytes) {
    stream.write(Buffer.from([byte]));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function lengthOnly(length: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64LE(length);
  return bytes;
}

/** The stream's listeners once a read has settled: none of the read's own may be left. */
function readListeners(stream: PassThrough): number[] {
  return ['readable', 'end', 'error', 'close'].map((event) => stream.listenerCount(event));
}

describe('decodeMessage', () => {
  it('matches keys case-insensitively into the canonical spelling, deeply', () => {
    const fromGo = decodeMessage('Auth', {
      Version: ['3', '2'],
      ClientId: '',
      Extra: {
        Authtoken: 'go-token',
        OS: 'linux',
        HeartbeatInterval: 10e9,
        Fingerprint: { m: ['x'] },
      },
    });
    const fromRust = decodeMessage('Auth', {
      version: ['3'],
      clientid: 'c1',
      extra: { AuthToken: 'rust-token', os: 'darwin', heartbeattolerance: 15e9 },
    });
    expect(fromGo.Extra).toEqual({
      AuthToken: 'go-token',
      OS: 'linux',
      HeartbeatInterval: 10e9,
      Fingerprint: { M: ['x'] },
    });
    expect(fromRust).toEqual({
      Version: ['3'],
      ClientId: 'c1',
      Extra: { AuthToken: 'rust-token', OS: 'darwin', HeartbeatTolerance: 15e9 },
    });
  });

  it('canonicalises Bind options from either SDK and leaves opaque values alone', () => {
    const bind = decodeMessage('Bind', {
      ID: 'b1',
      proto: 'http',
      Opts: {
        LocalURLScheme: 'https',
        domain: 'app.example.com',
        BasicAuth: { credentials: [{ username: 'u', cleartext_password: 'p' }] },
        TrafficPolicy: { Inbound: [{ Name: 'r', Actions: [{ Type: 'deny' }] }] },
        SomethingNew: 1,
      },
      extra: { token: 't', ippolicyref: 'ipp_1' },
    });
    expect(bind).toEqual({
      Id: 'b1',
      Proto: 'http',
      Opts: {
        LocalUrlScheme: 'https',
        Domain: 'app.example.com',
        BasicAuth: { credentials: [{ username: 'u', cleartext_password: 'p' }] },
        TrafficPolicy: { Inbound: [{ Name: 'r', Actions: [{ Type: 'deny' }] }] },
        SomethingNew: 1,
      },
      Extra: { Token: 't', IPPolicyRef: 'ipp_1' },
    });
    expect(decodeMessage('Bind', { opts: { LocalUrlScheme: 'http' } }).Opts).toEqual({
      LocalUrlScheme: 'http',
    });
  });

  it('keeps label keys exactly as sent and maps arrays of objects', () => {
    expect(
      decodeMessage('StartTunnelWithLabel', { labels: { edge: 'edghts_1', ID: 'x' } }),
    ).toEqual({
      Labels: { edge: 'edghts_1', ID: 'x' },
    });
    const resp = decodeMessage('AuthResp', {
      version: '3',
      extra: { connectaddresses: [{ region: 'eu', serveraddr: 'a:443' }] },
    });
    expect(resp.Extra?.ConnectAddresses).toEqual([{ Region: 'eu', ServerAddr: 'a:443' }]);
  });

  it('refuses a message that is not an object', () => {
    expect(() => decodeMessage('Bind', [1])).toThrow(TypeError);
    expect(() => decodeMessage('Bind', 'x')).toThrow(TypeError);
  });
});

describe('ProxyHeader', () => {
  const header: ProxyHeader = {
    Id: 'bind_1',
    ClientAddr: '203.0.113.7:45678',
    Proto: 'https',
    EdgeType: '',
    PassthroughTLS: false,
  };

  it('is an int64 little-endian length then JSON', () => {
    const bytes = encodeProxyHeader(header);
    const json = JSON.stringify(header);
    expect(bytes.readBigInt64LE(0)).toBe(BigInt(json.length));
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([json.length, 0]));
    expect(bytes.subarray(8).toString()).toBe(json);
  });

  it('opens a proxy stream with type 3, header and connection bytes in order', async () => {
    const { server, agent } = await typedPair();
    const incoming = agent.accept();
    const stream = openProxyStream(server, header);
    stream.end('GET / HTTP/1.1\r\n\r\n');
    const { type, stream: atAgent } = await incoming;
    expect(type).toBe(StreamType.Proxy);
    expect(await readProxyHeader(atAgent)).toEqual(header);
    expect(String(await readAll(atAgent))).toBe('GET / HTTP/1.1\r\n\r\n');
  });

  it('puts type and header in the SYN frame', async () => {
    const [a, b] = await socketPair();
    const session = new MuxSession(b, { role: 'server' });
    sessions.push(session);
    const wire = captured(a);
    openProxyStream(session, header);
    await until(() => wire.bytes().length > 12);
    const [frame] = decodeFrames(wire.bytes());
    expect(frame).toMatchObject({ type: 'data', streamId: 2, flags: FrameFlag.Syn });
    expect(frame?.type === 'data' && frame.payload.readUInt32BE(0)).toBe(3);
    a.destroy();
  });

  it('refuses an absurd length', async () => {
    const { client, server } = await sessionPair();
    sessions.push(client, server);
    const stream = client.openStream();
    const length = Buffer.alloc(8);
    length.writeBigInt64LE(BigInt(MAX_PROXY_HEADER + 1));
    stream.write(length);
    await expect(readProxyHeader(await server.accept())).rejects.toThrow(RangeError);
  });

  describe('readProxyHeader', () => {
    it('gathers a header that arrives a byte at a time, and leaves the payload', async () => {
      const stream = new PassThrough();
      const read = readProxyHeader(stream, 5000);
      await trickle(stream, Buffer.concat([encodeProxyHeader(header), Buffer.from('GET /')]));
      expect(await read).toEqual(header);
      expect(String(stream.read())).toBe('GET /');
      expect(readListeners(stream)).toEqual([0, 0, 0, 0]);
    });

    it('takes the header off a chunk that carries payload too, and puts the rest back paused', async () => {
      const stream = new PassThrough();
      const payload = Buffer.from('GET / HTTP/1.1\r\n\r\n');
      stream.write(Buffer.concat([encodeProxyHeader(header), payload]));
      expect(await readProxyHeader(stream)).toEqual(header);
      await sleep(10);
      // Nothing flowed off on its own: the payload waits for whoever reads or pipes next.
      expect(stream.readableFlowing).not.toBe(true);
      expect(stream.readableLength).toBe(payload.length);
      expect(stream.read()).toEqual(payload);
    });

    it('reads a header whose length and JSON come in separate chunks, payload behind it', async () => {
      const stream = new PassThrough();
      const bytes = encodeProxyHeader(header);
      const read = readProxyHeader(stream);
      stream.write(bytes.subarray(0, 3));
      await sleep(1);
      stream.write(bytes.subarray(3, 20));
      await sleep(1);
      stream.write(Buffer.concat([bytes.subarray(20), Buffer.from([0, 1, 2])]));
      expect(await read).toEqual(header);
      expect(stream.read()).toEqual(Buffer.from([0, 1, 2]));
    });

    it('refuses a length over MAX_PROXY_HEADER as soon as the length is in, without its body', async () => {
      const stream = new PassThrough();
      const read = readProxyHeader(stream, 5000);
      stream.write(lengthOnly(BigInt(MAX_PROXY_HEADER + 1)));
      await expect(read).rejects.toThrow(RangeError);
      expect(readListeners(stream)).toEqual([0, 0, 0, 0]);
      const negative = new PassThrough();
      negative.write(lengthOnly(-1n));
      await expect(readProxyHeader(negative)).rejects.toThrow(/out of range/);
    });

    it('accepts a header of exactly MAX_PROXY_HEADER bytes', async () => {
      const big = { ...header, ClientAddr: '' };
      const padding = MAX_PROXY_HEADER - JSON.stringify(big).length;
      big.ClientAddr = 'x'.repeat(padding);
      const bytes = encodeProxyHeader(big);
      expect(bytes.length).toBe(8 + MAX_PROXY_HEADER);
      const stream = new PassThrough();
      const read = readProxyHeader(stream);
      for (let at = 0; at < bytes.length; at += 1000) stream.write(bytes.subarray(at, at + 1000));
      expect(await read).toEqual(big);
    });

    it('times out a header that does not come whole, and lets go of the stream', async () => {
      const stream = new PassThrough();
      const read = readProxyHeader(stream, 50);
      stream.write(encodeProxyHeader(header).subarray(0, 12));
      await expect(read).rejects.toThrow(/timed out waiting for the ProxyHeader/);
      expect(readListeners(stream)).toEqual([0, 0, 0, 0]);
    });

    it('bounds the whole header by one timeout, not the length and the JSON each', async () => {
      const stream = new PassThrough();
      const bytes = encodeProxyHeader(header);
      const read = readProxyHeader(stream, 150);
      const failed = read.then(
        () => 'read',
        (err: Error) => err.message,
      );
      await sleep(100);
      stream.write(bytes.subarray(0, 8));
      await sleep(100);
      stream.write(bytes.subarray(8));
      expect(await failed).toMatch(/timed out/);
    });

    it('fails when the stream ends inside the header', async () => {
      const stream = new PassThrough();
      const read = readProxyHeader(stream, 5000);
      stream.end(encodeProxyHeader(header).subarray(0, 20));
      await expect(read).rejects.toThrow(/ended before the ProxyHeader/);
    });

    it('refuses a header that is not JSON', async () => {
      const stream = new PassThrough();
      stream.write(Buffer.concat([lengthOnly(3n), Buffer.from('{x}')]));
      await expect(readProxyHeader(stream)).rejects.toThrow(SyntaxError);
    });
  });

  describe('parseProxyHeader', () => {
    it('asks for the length, then for the whole JSON, then says what it used', () => {
      const bytes = encodeProxyHeader(header);
      expect(parseProxyHeader(Buffer.alloc(0))).toEqual({ need: 8 });
      expect(parseProxyHeader(bytes.subarray(0, 7))).toEqual({ need: 8 });
      expect(parseProxyHeader(bytes.subarray(0, 8))).toEqual({ need: bytes.length });
      expect(parseProxyHeader(bytes.subarray(0, -1))).toEqual({ need: bytes.length });
      expect(parseProxyHeader(Buffer.concat([bytes, Buffer.from('rest')]))).toEqual({
        value: header,
        used: bytes.length,
      });
    });
  });
});

describe('RPC', () => {
  it('calls and replies: request without FIN, reply with FIN, keys in any case', async () => {
    const { client, edge } = await typedPair();
    edge.on('stream', (stream: MuxStream, type: number) => {
      void (async () => {
        expect(type).toBe(StreamType.Auth);
        const auth = await readMessage(stream, 'Auth');
        writeReply(stream, {
          version: '3', // any casing is accepted back
          ClientId: `session-for-${auth.Extra?.AuthToken}`,
          Extra: { Region: 'local' },
        });
      })();
    });
    const reply = await call(client, StreamType.Auth, {
      Version: ['3', '2'],
      ClientId: '',
      Extra: { AuthToken: 'tok' },
    });
    expect(reply).toEqual({
      Version: '3',
      ClientId: 'session-for-tok',
      Extra: { Region: 'local' },
    });
    await until(() => client.streamCount === 0);
  });

  it('reads a request split across frames and followed by Go’s newline', async () => {
    const [a, b] = await socketPair();
    const server = new MuxSession(b, { role: 'server' });
    sessions.push(server);
    const typed = new TypedSession(server);
    const wire = captured(a);
    const request = Buffer.from('{"Id":"x","Proto":"tcp","Opts":{"Addr":"{}\\""}}\n');
    const type = Buffer.from([0, 0, 0, 1]);
    a.write(encodeData(3, Buffer.concat([type, request.subarray(0, 10)]), FrameFlag.Syn));
    const { stream } = await typed.accept();
    const message = readMessage(stream, 'Bind');
    a.write(encodeData(3, request.subarray(10)));
    expect(await message).toEqual({ Id: 'x', Proto: 'tcp', Opts: { Addr: '{}"' } });
    writeReply(stream, { Id: 'x', URL: 'tcp://h:1', Proto: 'tcp', Extra: { Token: '' } });
    await until(() =>
      decodeFrames(wire.bytes()).some((f) => f.type === 'data' && f.flags & FrameFlag.Fin),
    );
    const body = decodeFrames(wire.bytes())
      .filter((f) => f.type === 'data')
      .map((f) => (f.type === 'data' ? f.payload.toString() : ''))
      .join('');
    expect(JSON.parse(body)).toMatchObject({ Id: 'x', URL: 'tcp://h:1' });
    a.destroy();
  });

  it('turns a reply Error into RpcError with the ngrok code split out', async () => {
    const { client, edge } = await typedPair();
    edge.on('stream', (stream: MuxStream) => {
      void readMessage(stream).then(() =>
        writeReply(stream, {
          Error: rpcErrorText('authentication failed: bad token', 'ERR_NGROK_105'),
        }),
      );
    });
    const failure = call(client, StreamType.Auth, { Extra: { AuthToken: 'nope' } });
    await expect(failure).rejects.toBeInstanceOf(RpcError);
    await expect(failure).rejects.toMatchObject({
      errorCode: 'ERR_NGROK_105',
      message: 'authentication failed: bad token',
    });
  });

  it('times out a call that is never answered', async () => {
    const { client, edge } = await typedPair();
    edge.on('stream', () => {});
    await expect(call(client, StreamType.SrvInfo, {}, { timeoutMs: 50 })).rejects.toThrow(
      /timed out/,
    );
  });

  it('lets the server call the agent (Stop) and notify it (StopTunnel)', async () => {
    const { server, agent } = await typedPair();
    const seen: unknown[] = [];
    agent.on('stream', (stream: MuxStream, type: number) => {
      void (async () => {
        if (type === StreamType.Stop) {
          seen.push(await readMessage(stream, 'Stop'));
          writeReply(stream, { Error: '' });
        } else {
          seen.push(await readMessage(stream, 'StopTunnel'));
        }
      })();
    });
    expect(await call(server, StreamType.Stop, {})).toEqual({ Error: '' });
    notify(server, StreamType.StopTunnel, { Id: 'b1', Message: 'removed', ErrorCode: null });
    await until(() => seen.length === 2);
    expect(seen).toEqual([{}, { Id: 'b1', Message: 'removed', ErrorCode: null }]);
  });

  it('reading from a stream that is already over fails at once', async () => {
    const { client, server } = await sessionPair();
    sessions.push(client, server);
    const stream = client.openStream();
    stream.destroy();
    await expect(readExactly(stream, 4)).rejects.toThrow(/ended before/);
    await expect(readMessage(stream)).rejects.toThrow(/ended before/);
  });

  it('readExactly gathers bytes across chunks and leaves the rest', async () => {
    const { client, server } = await sessionPair();
    sessions.push(client, server);
    const stream = client.openStream();
    stream.write('ab');
    const accepted = await server.accept();
    const got = readExactly(accepted, 4);
    stream.end('cdef');
    expect(String(await got)).toBe('abcd');
    expect(String(await readAll(accepted))).toBe('ef');
  });
});

describe('readPrefix', () => {
  it('calls the parser again only once the bytes it asked for are in', async () => {
    const stream = new PassThrough();
    const seen: number[] = [];
    const read = readPrefix(stream, 'a 4-byte prefix', (head) => {
      seen.push(head.length);
      return head.length < 4 ? { need: 4 } : { value: head.readUInt32BE(0), used: 4 };
    });
    await trickle(stream, Buffer.from([0, 0, 1, 2, 9]));
    expect(await read).toBe(258);
    expect(seen).toEqual([1, 4]);
    expect(stream.read()).toEqual(Buffer.from([9]));
  });

  it('does not spin on a parser that asks for no more than it has', async () => {
    const stream = new PassThrough();
    const read = readPrefix(stream, 'a prefix', (head) =>
      head.length < 3 ? { need: 0 } : { value: head.length, used: head.length },
    );
    await trickle(stream, Buffer.from([1, 2, 3]));
    expect(await read).toBe(3);
  });
});
