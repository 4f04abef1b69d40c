import { once } from 'node:events';
import { connect } from 'node:net';
import { PassThrough, type Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import * as tls from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BurrowError, CODES } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { MuxSession } from '../../protocol/muxado/session.js';
import { readExactly } from '../../protocol/tunnel/reader.js';
import { nodeCredentials, type CaSettings, type NodeCredentials } from './cluster-ca.js';
import {
  LINK_GREETING,
  NODE_ALPN,
  encodeMessage,
  errorAnswer,
  parseAnswer,
  parseRequest,
  readMessage,
} from './node-link-wire.js';
import { NodeLinks, type NodeLinkRequest, type NodeLinksOptions } from './node-links.js';

class MemorySettings implements CaSettings {
  private readonly values = new Map<string, string>();
  async getOrCreate(key: string, make: () => string): Promise<string> {
    if (!this.values.has(key)) this.values.set(key, make());
    return this.values.get(key)!;
  }
}

const logger = createLogger('silent');
const REQUEST: NodeLinkRequest = {
  tunnelId: 'tn_echo',
  info: { clientAddr: '203.0.113.7:4567', proto: 'https', edgeType: '', passthroughTls: false },
};

/** A tunnel that echoes what it is sent. */
function echoTunnel(): Duplex {
  return new PassThrough();
}

/** Open handler: `tn_echo` echoes, `tn_hello` greets first, anything else is not here. */
async function openTunnel(request: NodeLinkRequest): Promise<Duplex> {
  if (request.tunnelId === 'tn_echo') return echoTunnel();
  if (request.tunnelId === 'tn_hello') {
    const tunnel = new PassThrough();
    tunnel.write('welcome;');
    return tunnel;
  }
  if (request.tunnelId === 'tn_broken') throw new Error('the agent went away');
  throw new BurrowError(CODES.tunnelNotFound, 404, `tunnel ${request.tunnelId} is not here`);
}

async function readAll(stream: Duplex): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

async function echo(stream: Duplex, text: string): Promise<string> {
  stream.end(text);
  return readAll(stream);
}

let creds: Record<'a' | 'b' | 't', NodeCredentials>;
let foreign: NodeCredentials;
const started: NodeLinks[] = [];

beforeAll(async () => {
  const settings = new MemorySettings();
  const [a, b, t] = await Promise.all(
    ['edge-a', 'edge-b', 'edge-t'].map((id) => nodeCredentials(settings, id)),
  );
  creds = { a: a!, b: b!, t: t! };
  foreign = await nodeCredentials(new MemorySettings(), 'edge-x');
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((links) => links.close()));
});

async function start(
  credentials: NodeCredentials,
  options: Partial<NodeLinksOptions> = {},
): Promise<NodeLinks> {
  const links = await NodeLinks.start({
    nodeId: credentials.nodeId,
    credentials,
    listen: '127.0.0.1:0',
    open: openTunnel,
    logger,
    ...options,
  });
  started.push(links);
  return links;
}

function peerOf(links: NodeLinks, id: string): { id: string; address: string } {
  return { id, address: links.address };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(10);
  expect(check()).toBe(true);
}

/** A test-side dial to `links` as node edge-t: the raw muxado session, no NodeLinks around it. */
async function rawLink(links: NodeLinks): Promise<MuxSession> {
  const [host, port] = links.address.split(':');
  const socket = tls.connect({
    host,
    port: Number(port),
    ca: creds.t.caPem,
    cert: creds.t.certPem,
    key: creds.t.keyPem,
    ALPNProtocols: [NODE_ALPN],
    checkServerIdentity: () => undefined,
  });
  await once(socket, 'secureConnect');
  expect((await readExactly(socket, LINK_GREETING.length)).equals(LINK_GREETING)).toBe(true);
  return new MuxSession(socket, { role: 'client' });
}

describe('NodeLinks', () => {
  it('relays a connection to the peer tunnel, telling it who asked', async () => {
    const seen: [NodeLinkRequest, string][] = [];
    const b = await start(creds.b, {
      open: (request, peer) => {
        seen.push([request, peer]);
        return openTunnel(request);
      },
    });
    const a = await start(creds.a);
    expect(b.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(b.address).not.toBe('127.0.0.1:0');
    const stream = await a.connect(peerOf(b, 'edge-b'), REQUEST);
    expect(await echo(stream, 'hello through the cluster')).toBe('hello through the cluster');
    expect(seen).toEqual([[REQUEST, 'edge-a']]);
  });

  it('shares one TLS connection between concurrent connects, in both directions', async () => {
    const b = await start(creds.b);
    const a = await start(creds.a);
    const streams = await Promise.all(
      Array.from({ length: 20 }, () => a.connect(peerOf(b, 'edge-b'), REQUEST)),
    );
    const answers = await Promise.all(streams.map((s, i) => echo(s, `payload ${i}`)));
    expect(answers).toEqual(streams.map((_, i) => `payload ${i}`));
    expect(a.linkCount).toBe(1);
    expect(b.linkCount).toBe(1);
    // B reaches A over the link A dialled.
    const back = await b.connect(peerOf(a, 'edge-a'), REQUEST);
    expect(await echo(back, 'back')).toBe('back');
    expect(a.linkCount).toBe(1);
    expect(b.linkCount).toBe(1);
  });

  it('works when both nodes dial at once, and closes every link', async () => {
    const a = await start(creds.a);
    const b = await start(creds.b);
    const [ab, ba] = await Promise.all([
      a.connect(peerOf(b, 'edge-b'), REQUEST),
      b.connect(peerOf(a, 'edge-a'), REQUEST),
    ]);
    expect(await Promise.all([echo(ab, 'ab'), echo(ba, 'ba')])).toEqual(['ab', 'ba']);
    expect(a.linkCount).toBeGreaterThanOrEqual(1);
    expect(a.linkCount).toBeLessThanOrEqual(2);
    await a.close();
    expect(a.linkCount).toBe(0);
    await until(() => b.linkCount === 0);
    await expect(a.connect(peerOf(b, 'edge-b'), REQUEST)).rejects.toThrow(/shutting down/);
  });

  it("surfaces the peer's error code, status and message", async () => {
    const b = await start(creds.b);
    const a = await start(creds.a);
    const missing = a.connect(peerOf(b, 'edge-b'), { ...REQUEST, tunnelId: 'tn_gone' });
    await expect(missing).rejects.toMatchObject({
      code: CODES.tunnelNotFound,
      statusCode: 404,
      message: 'tunnel tn_gone is not here',
      details: { node: 'edge-b' },
    });
    const broken = a.connect(peerOf(b, 'edge-b'), { ...REQUEST, tunnelId: 'tn_broken' });
    await expect(broken).rejects.toMatchObject({
      code: CODES.tunnelUnreachable,
      statusCode: 502,
      message: 'the agent went away',
    });
    // The link survives refusals.
    expect(await echo(await a.connect(peerOf(b, 'edge-b'), REQUEST), 'still')).toBe('still');
    expect(a.linkCount).toBe(1);
  });

  it('keeps bytes the tunnel sends right after the answer', async () => {
    const b = await start(creds.b);
    const a = await start(creds.a);
    const stream = await a.connect(peerOf(b, 'edge-b'), { ...REQUEST, tunnelId: 'tn_hello' });
    expect(await echo(stream, 'hi')).toBe('welcome;hi');
  });

  it('refuses nodes of another cluster, both ways, and a node with another id', async () => {
    const a = await start(creds.a);
    const b = await start(creds.b);
    const x = await start(foreign);
    const dialForeign = a.connect(peerOf(x, 'edge-x'), REQUEST);
    await expect(dialForeign).rejects.toMatchObject({ code: CODES.nodeUnreachable });
    await expect(dialForeign).rejects.toThrow(/edge-x at 127\.0\.0\.1:\d+/);
    const foreignDial = x.connect(peerOf(b, 'edge-b'), REQUEST);
    await expect(foreignDial).rejects.toMatchObject({ code: CODES.nodeUnreachable });
    const impostor = a.connect({ id: 'edge-c', address: b.address }, REQUEST);
    await expect(impostor).rejects.toThrow(/certificate names node edge-b/);
    // The acceptor's own check: a dialer that trusts our CA but shows a foreign certificate, none,
    // or no ALPN is dropped before the greeting.
    const [host, port] = b.address.split(':');
    for (const [client, alpn] of [
      [foreign, [NODE_ALPN]],
      [undefined, [NODE_ALPN]],
      [creds.t, undefined],
    ] as const) {
      const socket = tls.connect({
        host,
        port: Number(port),
        ca: creds.b.caPem,
        cert: client?.certPem,
        key: client?.keyPem,
        ALPNProtocols: alpn,
        checkServerIdentity: () => undefined,
      });
      let received = 0;
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('close', resolve));
      expect(received).toBe(0);
    }
    expect(b.linkCount).toBe(0);
    expect(x.linkCount).toBe(0);
    expect(a.linkCount).toBe(0);
  });

  it('closes a peer whose handshake does not finish in time, however it trickles', async () => {
    const b = await start(creds.b, { connectTimeoutMs: 300 });
    const [host, port] = b.address.split(':');
    const socket = connect(Number(port), host);
    socket.on('error', () => undefined);
    await once(socket, 'connect');
    // A TLS record of 512 bytes announced, then a byte of it every 100 ms: nothing to refuse yet,
    // and an idle timer (Node's handshakeTimeout) would never fire.
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]));
    const trickle = setInterval(() => socket.write(Buffer.alloc(1)), 100);
    const before = Date.now();
    try {
      await once(socket, 'close');
    } finally {
      clearInterval(trickle);
    }
    expect(Date.now() - before).toBeLessThan(2000);
    expect(b.linkCount).toBe(0);
  });

  it('fails fast when the peer is down, and dials again once it is back', async () => {
    const b = await start(creds.b);
    const a = await start(creds.a);
    const peer = peerOf(b, 'edge-b');
    expect(await echo(await a.connect(peer, REQUEST), 'one')).toBe('one');
    await b.close();
    await until(() => a.linkCount === 0);
    const before = Date.now();
    const down = a.connect(peer, REQUEST);
    await expect(down).rejects.toMatchObject({ code: CODES.nodeUnreachable });
    await expect(down).rejects.toThrow(/edge-b at 127\.0\.0\.1:\d+.*ECONNREFUSED/);
    expect(Date.now() - before).toBeLessThan(1000);

    const again = await start(creds.b, { listen: peer.address });
    expect(again.address).toBe(peer.address);
    expect(await echo(await a.connect(peer, REQUEST), 'two')).toBe('two');
    expect(a.linkCount).toBe(1);
  });

  it('times out a peer that does not answer', async () => {
    let answerLate!: (tunnel: Duplex) => void;
    const b = await start(creds.b, {
      open: () => new Promise<Duplex>((resolve) => (answerLate = resolve)),
    });
    const a = await start(creds.a, { connectTimeoutMs: 200 });
    const before = Date.now();
    await expect(a.connect(peerOf(b, 'edge-b'), REQUEST)).rejects.toMatchObject({
      code: CODES.nodeConnectTimeout,
    });
    expect(Date.now() - before).toBeLessThan(2000);
    // The tunnel that opens too late is closed, not leaked.
    const late = new PassThrough();
    answerLate(late);
    await until(() => late.destroyed);
  });

  it('resets a malformed request without harming the link', async () => {
    const b = await start(creds.b);
    const session = await rawLink(b);
    await until(() => b.linkCount === 1);
    const bad = [
      Buffer.from([0x00, 0x10, 0x00, 0x00]), // 1 MiB announced
      Buffer.concat([Buffer.from([0, 0, 0, 5]), Buffer.from('nope!')]),
      encodeMessage({ tunnelId: 'tn_echo', info: { ...REQUEST.info, edgeType: '9' } } as never),
    ];
    for (const bytes of bad) {
      const stream = session.openStream();
      const failed = new Promise<Error | undefined>((resolve) => {
        stream.on('error', resolve);
        stream.on('close', () => resolve(undefined));
      });
      stream.write(bytes);
      expect(await failed).toMatchObject({ code: CODES.muxProtocol });
    }
    const good = session.openStream();
    good.write(encodeMessage(REQUEST));
    expect(parseAnswer(await readMessage(good))).toEqual({ ok: true });
    expect(await echo(good, 'fine')).toBe('fine');
    expect(session.closed).toBe(false);
    expect(b.linkCount).toBe(1);
    session.close();
  });

  it('forgets a peer: its links close on both sides', async () => {
    const b = await start(creds.b);
    const a = await start(creds.a);
    await echo(await a.connect(peerOf(b, 'edge-b'), REQUEST), 'x');
    a.forget('edge-b');
    expect(a.linkCount).toBe(0);
    await until(() => b.linkCount === 0);
  });

  it('advertises an address other than the bound one', async () => {
    const a = await start(creds.a, { listen: '127.0.0.1:0', advertise: 'node-a.internal' });
    expect(a.boundAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(a.address).toBe(`node-a.internal:${a.boundAddress.split(':')[1]}`);
    await expect(start(creds.b, { advertise: 'a:b:c' })).rejects.toThrow(TypeError);
  });
});

describe('node link wire', () => {
  it('reads one message and leaves what follows in the stream', async () => {
    const stream = new PassThrough();
    stream.write(Buffer.concat([encodeMessage({ ok: true }), Buffer.from('after')]));
    expect(parseAnswer(await readMessage(stream))).toEqual({ ok: true });
    stream.end();
    expect(await readAll(stream)).toBe('after');
  });

  it('checks requests field by field', () => {
    const ok = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
    expect(parseRequest(ok({ ...REQUEST, extra: 1 }))).toEqual(REQUEST);
    for (const bad of [
      [],
      { info: REQUEST.info },
      { tunnelId: '', info: REQUEST.info },
      { tunnelId: 'tn_1' },
      { tunnelId: 'tn_1', info: { ...REQUEST.info, clientAddr: 5 } },
      { tunnelId: 'tn_1', info: { ...REQUEST.info, proto: null } },
      { tunnelId: 'tn_1', info: { ...REQUEST.info, edgeType: 1 } },
      { tunnelId: 'tn_1', info: { ...REQUEST.info, passthroughTls: 'yes' } },
    ]) {
      expect(() => parseRequest(ok(bad))).toThrow(
        expect.objectContaining({ code: CODES.nodeLinkProtocol }),
      );
    }
    expect(() => parseRequest(Buffer.from('{'))).toThrow(/not JSON/);
  });

  it('checks answers, and turns open() failures into answers', () => {
    const answer = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
    expect(parseAnswer(answer({ error: { code: 'ERR_NGROK_3200', message: 'm' } }))).toEqual({
      error: { code: 'ERR_NGROK_3200', message: 'm', status: undefined },
    });
    for (const bad of [{}, { ok: 1 }, { error: { code: 'nope', message: 'm' } }]) {
      expect(() => parseAnswer(answer(bad))).toThrow(/neither ok nor an error/);
    }
    expect(errorAnswer(new BurrowError(CODES.tunnelNotFound, 404, 'gone'))).toEqual({
      error: { code: CODES.tunnelNotFound, message: 'gone', status: 404 },
    });
    expect(errorAnswer('odd')).toEqual({
      error: { code: CODES.tunnelUnreachable, message: 'odd', status: 502 },
    });
  });
});
