/**
 * Per-call costs on the edge's response path, in one process, for two or more built trees (their
 * `dist/`), alternated (issue 29): too small for the end-to-end runs of keepalive-ab.ts, whose
 * rounds on a shared machine move by 20 % and more, to resolve one at a time.
 *
 *   node --import tsx bench/support/relay-micro.ts /tmp/wt-before /tmp/wt-after
 *   ROUNDS=7 node --import tsx bench/support/relay-micro.ts /tmp/wt-before /tmp/wt-after
 *
 * - `parseResponseHead`: the head of the bulk service's 12-byte answer (Node's http: Date,
 *   Connection, Keep-Alive, Content-Length) and a longer one, each decoded from bytes first as
 *   the relay does; ns per head.
 * - agent-link reads: a MuxSession with a SlabLender, as the edge runs one (coalesced reads),
 *   fed 8 reads per turn of one slab, each a DATA frame of 200 bytes on one of 50 streams in
 *   turn (a response on a pooled stream), whose reader takes the chunk; through the tree's `slabSink` when it has one (the reads
 *   as ranges), else as readIntoSlabs delivers them before it ('data' events of slab views). ns
 *   per read, the stream's handling of its chunk included.
 *
 * - response write (the same for every tree): a 12-byte answer with its head written to a loopback
 *   socket as one buffer built for it (allocated, the head written in as latin1, the body copied
 *   after it: writeWholeResponse before 2026-11-29) and as one latin1 string; ns per write, the
 *   system call and the reading side (a socket of this process) included.
 *
 * NO_SINK=1 feeds every tree through 'data' events, `slabSink` or not, and a tree named
 * `<tree>:nosink` is fed so alone (the lending of DATA chunks without the reads as ranges). Prints each round and the median per tree.
 */
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { median } from './load.js';

const ROUNDS = Number(process.env.ROUNDS ?? 5);

type Parse = (text: string, method: string) => unknown;
interface Lender {
  take(): Buffer;
  leave(slab: Buffer): void;
  lendRead(view: Buffer): boolean;
  lendSlab?: (slab: Buffer, length: number) => boolean;
}
interface Stream {
  on(event: 'data', listener: (chunk: Buffer) => void): void;
}
interface Session {
  on(event: 'stream', listener: (stream: Stream) => void): void;
  destroy(): void;
  slabSink?: (slab: Buffer, start: number, length: number) => void;
}
interface Tree {
  root: string;
  /** Named `<tree>:nosink`: fed through 'data' events though it has a `slabSink`. */
  noSink: boolean;
  parse: Parse;
  Lender: new (size?: number) => Lender;
  Session: new (transport: PassThrough, options: object) => Session;
  encodeFrameHeader: (
    type: number,
    flags: number,
    id: number,
    length: number,
    out: Buffer,
    at?: number,
  ) => Buffer;
}

async function load(arg: string): Promise<Tree> {
  const noSink = arg.endsWith(':nosink');
  const root = noSink ? arg.slice(0, -':nosink'.length) : arg;
  const url = (path: string): string => pathToFileURL(join(root, 'dist', path)).href;
  const head = (await import(url('edge/ingress/http/response-head.js'))) as {
    parseResponseHead: Parse;
  };
  const slabs = (await import(url('protocol/muxado/slab-reads.js'))) as {
    SlabLender: Tree['Lender'];
  };
  const session = (await import(url('protocol/muxado/session.js'))) as {
    MuxSession: Tree['Session'];
  };
  const frame = (await import(url('protocol/muxado/frame.js'))) as {
    encodeFrameHeader: Tree['encodeFrameHeader'];
  };
  return {
    root: arg,
    noSink,
    parse: head.parseResponseHead,
    Lender: slabs.SlabLender,
    Session: session.MuxSession,
    encodeFrameHeader: frame.encodeFrameHeader,
  };
}

const HEADS = [
  'HTTP/1.1 200 OK\r\nDate: Sun, 29 Nov 2026 07:25:00 GMT\r\nConnection: keep-alive\r\n' +
    'Keep-Alive: timeout=5\r\nContent-Length: 12\r\n\r\n',
  'HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 1234\r\n' +
    'Cache-Control: no-cache\r\nDate: Sun, 29 Nov 2026 07:25:00 GMT\r\nETag: "abc"\r\n\r\n',
].map((text) => Buffer.from(text, 'latin1'));

let sink: unknown;

function parseNs(tree: Tree): number {
  const n = 1_000_000;
  for (let i = 0; i < n / 5; i++) sink = tree.parse(HEADS[i & 1]!.toString('latin1'), 'GET');
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) sink = tree.parse(HEADS[i & 1]!.toString('latin1'), 'GET');
  return Number(process.hrtime.bigint() - started) / n;
}

/** ns per read of the agent link: TURNS turns of READS reads, each a DATA frame of 200 bytes. */
async function readNs(tree: Tree): Promise<number> {
  const TURNS = 20_000;
  const READS = 8;
  const PAYLOAD = 200;
  const SIZE = 8 + PAYLOAD;
  const STREAMS = 50;
  const lender = new tree.Lender();
  const transport = new PassThrough();
  const session = new tree.Session(transport, { role: 'server', coalesceReads: true, lender });
  let taken = 0;
  session.on('stream', (stream) => stream.on('data', (chunk) => (taken += chunk.length)));
  const direct = process.env.NO_SINK === '1' || tree.noSink ? undefined : session.slabSink;
  let slab = lender.take();
  let used = 0;
  let id = 0;
  const turn = (): void => {
    for (let r = 0; r < READS; r++) {
      if (slab.length - used < 16 * 1024) {
        lender.leave(slab);
        slab = lender.take();
        used = 0;
      }
      // STREAMS streams, opened by their first frame (SYN), each read a DATA frame of one of
      // them in turn: a response on a pooled stream.
      const stream = 3 + 2 * (id % STREAMS);
      tree.encodeFrameHeader(0x1, id < STREAMS ? 0x2 : 0, stream, PAYLOAD, slab, used);
      slab.fill(0x61, used + 8, used + SIZE);
      id++;
      if (direct) {
        lender.lendSlab!(slab, SIZE);
        direct(slab, used, SIZE);
      } else {
        const view = slab.subarray(used, used + SIZE);
        lender.lendRead(view);
        transport.emit('data', view);
      }
      used += SIZE;
    }
  };
  const run = async (turns: number): Promise<void> => {
    for (let t = 0; t < turns; t++) {
      turn();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  await run(TURNS / 5);
  const started = process.hrtime.bigint();
  await run(TURNS);
  const ns = Number(process.hrtime.bigint() - started) / (TURNS * READS);
  if (taken === 0) throw new Error('no data reached the streams');
  session.destroy();
  return ns;
}

/** ns per response written to a loopback socket, as one built buffer or as one latin1 string. */
async function writeNs(asString: boolean): Promise<number> {
  const head =
    'HTTP/1.1 200 OK\r\nDate: Sun, 29 Nov 2026 07:25:00 GMT\r\nContent-Length: 12\r\n\r\n';
  const rest = Buffer.from('hello world\n');
  const server = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const write = asString
    ? () => socket.write(head + rest.toString('latin1', 0, rest.length), 'latin1')
    : () => {
        const bytes = Buffer.allocUnsafe(head.length + rest.length);
        bytes.write(head, 0, 'latin1');
        rest.copy(bytes, head.length, 0, rest.length);
        return socket.write(bytes);
      };
  const n = 100_000;
  const run = async (count: number): Promise<number> => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i++) {
      if (!write()) await new Promise((resolve) => socket.once('drain', resolve));
    }
    return Number(process.hrtime.bigint() - started) / count;
  };
  await run(n / 5);
  const ns = await run(n);
  socket.destroy();
  server.close();
  return ns;
}

const trees = await Promise.all(process.argv.slice(2).map(load));
if (trees.length === 0) throw new Error('usage: relay-micro.ts <built tree> [<built tree> …]');
const results = new Map(trees.map((t) => [t, { parse: [] as number[], read: [] as number[] }]));
for (let round = 1; round <= ROUNDS; round++) {
  for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
    const parse = parseNs(tree);
    const read = await readNs(tree);
    results.get(tree)!.parse.push(parse);
    results.get(tree)!.read.push(read);
    console.log(
      `round ${round} ${tree.root}: parseResponseHead ${parse.toFixed(0)} ns, ` +
        `agent-link read ${read.toFixed(0)} ns`,
    );
  }
}
const written = { buffer: [] as number[], string: [] as number[] };
for (let round = 1; round <= ROUNDS; round++) {
  const order = round % 2 === 1 ? [false, true] : [true, false];
  for (const asString of order) {
    written[asString ? 'string' : 'buffer'].push(await writeNs(asString));
  }
}
console.log(
  `median of ${ROUNDS} response writes: as one built buffer ` +
    `${median(written.buffer).toFixed(0)} ns, as one latin1 string ` +
    `${median(written.string).toFixed(0)} ns (rounds: ${written.buffer
      .map((b, i) => `${b.toFixed(0)}/${written.string[i]!.toFixed(0)}`)
      .join(' ')})`,
);
for (const tree of trees) {
  const r = results.get(tree)!;
  console.log(
    `median of ${ROUNDS} ${tree.root}: parseResponseHead ${median(r.parse).toFixed(0)} ns per ` +
      `head, agent-link read ${median(r.read).toFixed(0)} ns per read`,
  );
}
void sink;
