import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MuxSession, SlabLender, type MuxStream, type ProxyHeader } from '../protocol/index.js';
import { readAll, tlsPair, until } from '../../test/support/mux.js';
import { createForwarder, type ForwardHooks } from './forward.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const thing of open.splice(0)) thing.close();
});

/** A TCP service that writes `body` to every connection and closes it. */
async function serviceSending(body: Buffer): Promise<number> {
  const server = net.createServer((socket) => socket.end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  open.push(server);
  return (server.address() as net.AddressInfo).port;
}

/**
 * An agent's session (client, forwarding the edge's streams to `port`, its service reads lent
 * from `lender`) and the edge's (server) over real TLS on loopback.
 */
async function tunnelTo(
  port: number,
  lender: SlabLender,
): Promise<{ edge: MuxSession; edgeSide: net.Socket }> {
  const [agentSide, edgeSide] = await tlsPair();
  // A window and a write buffer larger than the sockets' kernel buffers: a stalled edge leaves
  // megabytes of the agent's frames waiting in its TLS socket, lent bytes and all, while the
  // service's reads go on.
  const window = 16 * 1024 * 1024;
  const agent = new MuxSession(agentSide, {
    role: 'client',
    window,
    writeBufferSize: 8 * 1024 * 1024,
    sendLender: lender,
  });
  const edge = new MuxSession(edgeSide, { role: 'server', window });
  open.push({ close: () => (agent.destroy(), edge.destroy()) });
  const forwarder = createForwarder(`127.0.0.1:${port}`, { connectTimeoutMs: 5000 });
  const header: ProxyHeader = {
    Id: 'x',
    ClientAddr: '192.0.2.1:1234',
    Proto: 'tcp',
    EdgeType: '1',
    PassthroughTLS: false,
  };
  const hooks: ForwardHooks = {
    url: undefined,
    onExchange: undefined,
    captureBytes: 0,
    onError: () => undefined,
  };
  agent.on('stream', (stream: MuxStream) => forwarder.handle(stream, header, hooks));
  return { edge, edgeSide };
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

describe('forwarding to a local address', () => {
  it('reads a bulk transfer into lent slabs, read into again, and delivers every byte intact', async () => {
    const body = randomBytes(24 * 1024 * 1024);
    const lender = new SlabLender();
    const { edge } = await tunnelTo(await serviceSending(body), lender);
    const stream = edge.openStream();
    stream.end();
    const got = await readAll(stream);
    expect(got.length).toBe(body.length);
    expect(sha256(got)).toBe(sha256(body));
    // Once the link had written a slab's bytes, the service's later reads went into it again.
    expect(lender.reused).toBeGreaterThan(0);
  });

  it('gives slab bytes back only once written, not when framed, while the link is stalled', async () => {
    const body = randomBytes(24 * 1024 * 1024);
    const lender = new SlabLender();
    const { edge, edgeSide } = await tunnelTo(await serviceSending(body), lender);
    const stream = edge.openStream();
    stream.end();
    const got = readAll(stream);
    // The edge stops reading its socket: the agent's frames wait in its TLS socket's buffer,
    // framed but not yet written, while the service's reads go on into slabs.
    edgeSide.pause();
    await new Promise((resolve) => setTimeout(resolve, 300));
    edgeSide.resume();
    const bytes = await got;
    expect(bytes.length).toBe(body.length);
    expect(sha256(bytes)).toBe(sha256(body));
    expect(lender.taken).toBeGreaterThan(0);
  });

  it('gives every slab back when the service connection closes', async () => {
    // Room for every slab the transfer takes: with this test's window, megabytes are in flight.
    const lender = new SlabLender(undefined, 1024);
    const { edge } = await tunnelTo(await serviceSending(randomBytes(8 * 1024 * 1024)), lender);
    const stream = edge.openStream();
    stream.end();
    await readAll(stream);
    // The slab the connection was reading into last comes back too, not only those it had left.
    const allocated = lender.taken - lender.reused;
    expect(allocated).toBeGreaterThan(0);
    await until(() => lender.spareSlabs === allocated);
  });

  it('leaves an answer under a megabyte in Node’s own reads: an idle connection holds no slab', async () => {
    const body = randomBytes(768 * 1024);
    const lender = new SlabLender();
    const { edge } = await tunnelTo(await serviceSending(body), lender);
    const stream = edge.openStream();
    stream.end();
    expect(sha256(await readAll(stream))).toBe(sha256(body));
    expect(lender.taken).toBe(0);
  });
});
