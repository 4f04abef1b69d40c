import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BurrowError, CODES } from '../../core/errors.js';
import { createLogger } from '../../core/logger.js';
import { nodeCredentials, type CaSettings, type NodeCredentials } from './cluster-ca.js';
import { MAX_REPLY_BYTES, parseReply } from './node-link-queries.js';
import { NodeLinks, type NodeLinksOptions } from './node-links.js';

class MemorySettings implements CaSettings {
  private readonly values = new Map<string, string>();
  async getOrCreate(key: string, make: () => string): Promise<string> {
    if (!this.values.has(key)) this.values.set(key, make());
    return this.values.get(key)!;
  }
}

const logger = createLogger('silent');
let creds: Record<'a' | 'b', NodeCredentials>;
const started: NodeLinks[] = [];

beforeAll(async () => {
  const settings = new MemorySettings();
  const [a, b] = await Promise.all(['api-a', 'edge-b'].map((id) => nodeCredentials(settings, id)));
  creds = { a: a!, b: b! };
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
    open: () => Promise.reject(new Error('no tunnels here')),
    logger,
    ...options,
  });
  started.push(links);
  return links;
}

/** A dial-only node (as an API-only node is) and an edge node that answers with `answer`. */
async function pair(answer?: NodeLinksOptions['answer']) {
  const b = await start(creds.b, { answer });
  const a = await start(creds.a, { listen: undefined });
  return { a, b, peer: { id: 'edge-b', address: b.address } };
}

describe('node link queries', () => {
  it('a dial-only node asks a question and gets the answer, the asker named', async () => {
    const seen: string[] = [];
    const { a, peer } = await pair(async (query, peerId) => {
      seen.push(`${peerId} ${query.kind}`);
      return { echoed: query.n };
    });
    expect(a.address).toBe('');
    expect(await a.ask(peer, { kind: 'test.echo', n: 7 }, 2000)).toEqual({ echoed: 7 });
    // One link carries every question.
    expect(await a.ask(peer, { kind: 'test.echo', n: 8 }, 2000)).toEqual({ echoed: 8 });
    expect(seen).toEqual(['api-a test.echo', 'api-a test.echo']);
    expect(a.linkCount).toBe(1);
  });

  it("relays the peer's error, and says so when it answers no questions", async () => {
    const { a, peer } = await pair(() =>
      Promise.reject(new BurrowError(CODES.invalidValue, 400, 'no such thing')),
    );
    await expect(a.ask(peer, { kind: 'test.x' }, 2000)).rejects.toMatchObject({
      code: CODES.invalidValue,
      statusCode: 400,
      message: 'no such thing',
    });
    const silent = await pair(undefined);
    await expect(silent.a.ask(silent.peer, { kind: 'test.x' }, 2000)).rejects.toMatchObject({
      code: CODES.nodeLinkProtocol,
      message: expect.stringMatching(/answers no queries/) as string,
    });
  });

  it('gives up on a peer that does not answer in time, and on one nobody listens for', async () => {
    const { a, peer } = await pair(() => new Promise(() => undefined));
    const started = Date.now();
    await expect(a.ask(peer, { kind: 'test.hang' }, 200)).rejects.toMatchObject({
      code: CODES.nodeConnectTimeout,
    });
    expect(Date.now() - started).toBeLessThan(2000);
    const closed = await start(creds.b);
    const address = closed.address;
    await closed.close();
    // A fresh asker: `a` still holds its link to the first edge-b.
    const fresh = await start(creds.a, { listen: undefined });
    await expect(
      fresh.ask({ id: 'edge-b', address }, { kind: 'test.x' }, 2000),
    ).rejects.toMatchObject({
      code: CODES.nodeUnreachable,
    });
  });

  it('answers an error rather than a reply over the size limit', async () => {
    const { a, peer } = await pair(async () => 'x'.repeat(MAX_REPLY_BYTES));
    await expect(a.ask(peer, { kind: 'test.big' }, 5000)).rejects.toMatchObject({
      message: expect.stringMatching(/over the \d+-byte limit/) as string,
    });
  });

  it('reads ok replies and error replies, and refuses anything else', () => {
    const peer = { id: 'edge-b', address: '127.0.0.1:1' };
    expect(parseReply(Buffer.from('{"ok":true,"value":null}'), peer)).toBeNull();
    expect(() => parseReply(Buffer.from('{"ok":true}'), peer)).toThrow(/no value/);
    expect(() => parseReply(Buffer.from('[1'), peer)).toThrow(/not JSON/);
    expect(() =>
      parseReply(Buffer.from('{"error":{"code":"ERR_X","message":"m","status":404}}'), peer),
    ).toThrow('m');
  });
});
