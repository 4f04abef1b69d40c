import { Duplex } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzRuns, reportFuzz } from '../../test/support/fuzz.js';
import {
  ErrorCode,
  FrameError,
  FrameFlag,
  FrameParser,
  encodeData,
  encodeGoAway,
  encodeRst,
  encodeWndInc,
  type FrameSink,
} from './muxado/frame.js';
import { JsonObjectScanner } from './tunnel/json-scanner.js';
import { decodeMessage, type MessageName } from './tunnel/messages.js';
import { readMessage } from './tunnel/rpc.js';
import { MuxSession } from './muxado/session.js';
import type { MuxStream } from './muxado/stream.js';

/**
 * Fuzzing the agent protocol: the muxado frame parser and a whole server session fed arbitrary
 * bytes and mutated valid frames, and the message decoder fed arbitrary JSON. The session must
 * end cleanly (wait() resolves) and nothing may be thrown at the process.
 */

const NO_SINK: FrameSink = {
  dataStart: () => undefined,
  dataChunk: () => undefined,
  dataEnd: () => undefined,
  rst: () => undefined,
  wndInc: () => undefined,
  goAway: () => undefined,
};

/** Valid frames a client could send: SYN with a JSON message, data, FIN, window, RST, GOAWAY. */
const validFrame = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1, max: 9 }), fc.json({ maxDepth: 3 }))
    .map(([id, json]) =>
      encodeData(id * 2 + 1, Buffer.from(`${json === 'null' ? '{}' : json}\n`), FrameFlag.Syn),
    ),
  fc
    .tuple(fc.integer({ min: 1, max: 9 }), fc.uint8Array({ maxLength: 64 }))
    .map(([id, bytes]) => encodeData(id * 2 + 1, Buffer.from(bytes))),
  fc
    .integer({ min: 1, max: 9 })
    .map((id) => encodeData(id * 2 + 1, Buffer.alloc(0), FrameFlag.Fin)),
  fc
    .tuple(fc.integer({ min: 1, max: 19 }), fc.integer({ min: 1, max: 2 ** 31 - 1 }))
    .map(([id, inc]) => encodeWndInc(id, inc)),
  fc.integer({ min: 1, max: 19 }).map((id) => encodeRst(id, ErrorCode.StreamRefused)),
  fc.string({ maxLength: 40 }).map((m) => encodeGoAway(0, ErrorCode.None, m)),
);

/** Valid frames with bytes flipped, cut short or spliced: the shape of real-world garbage. */
const mutatedFrames = fc
  .tuple(
    fc.array(validFrame, { minLength: 1, maxLength: 6 }),
    fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 6 }),
    fc.option(fc.nat()),
  )
  .map(([frames, flips, cut]) => {
    const bytes = Buffer.concat(frames);
    for (const [pos, value] of flips) bytes[pos % bytes.length] = value;
    return cut === null ? bytes : bytes.subarray(0, cut % (bytes.length + 1));
  });

const anyBytes = fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.from(a));

/** Feed `bytes` (in `chunks` pieces) to a fresh server session; resolves once it has ended. */
async function feedSession(bytes: Buffer, pieces: number, listen: boolean): Promise<void> {
  const transport = new Duplex({
    read: () => undefined,
    write: (_chunk, _enc, done) => done(),
  });
  const session = new MuxSession(transport, { role: 'server' });
  session.on('stream', (stream: MuxStream) => {
    // An owner that has not started reading (no 'error' listener yet) must be safe too.
    if (!listen) return;
    // What the edge does with a new stream: read one message, reply, end.
    readMessage(stream, 'Bind', { timeoutMs: 50 })
      .then(() => stream.end('{}'))
      .catch(() => stream.destroy());
  });
  const step = Math.max(1, Math.ceil(bytes.length / pieces));
  for (let i = 0; i < bytes.length; i += step) transport.push(bytes.subarray(i, i + step));
  transport.push(null);
  const ended = await Promise.race([
    session.wait().then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2000)),
  ]);
  session.destroy();
  transport.destroy();
  expect(ended).toBe(true);
}

describe('fuzz: agent protocol', () => {
  const thrown: unknown[] = [];
  const record = (err: unknown) => thrown.push(err);
  beforeAll(() => {
    process.on('uncaughtException', record);
    process.on('unhandledRejection', record);
  });
  afterAll(() => {
    process.off('uncaughtException', record);
    process.off('unhandledRejection', record);
    expect(thrown).toEqual([]);
  }, 600_000);

  it('the frame parser throws only FrameError, on arbitrary and mutated bytes', () => {
    const runs = fuzzRuns(5000, 250_000);
    fc.assert(
      fc.property(fc.oneof(anyBytes, mutatedFrames), fc.integer({ min: 1, max: 7 }), (bytes, n) => {
        const parser = new FrameParser(NO_SINK);
        try {
          const step = Math.max(1, Math.ceil(bytes.length / n));
          for (let i = 0; i < bytes.length; i += step) parser.push(bytes.subarray(i, i + step));
        } catch (err) {
          expect(err).toBeInstanceOf(FrameError);
        }
      }),
      { numRuns: runs },
    );
    reportFuzz('muxado frame parser (src/protocol/muxado/frame.ts)', runs);
  }, 600_000);

  it('a server session fed arbitrary or mutated frames ends cleanly and throws nothing', async () => {
    const runs = fuzzRuns(2000, 100_000);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anyBytes, mutatedFrames, mutatedFrames),
        fc.integer({ min: 1, max: 5 }),
        fc.boolean(),
        feedSession,
      ),
      { numRuns: runs },
    );
    reportFuzz('muxado session + RPC reads (src/protocol/muxado/session.ts)', runs);
  }, 600_000);

  it('the message scanner and decoder throw only SyntaxError, RangeError or TypeError', () => {
    const names: MessageName[] = [
      'Auth',
      'Bind',
      'Unbind',
      'StartTunnelWithLabel',
      'PatchTunnelState',
      'StopTunnel',
    ];
    const runs = fuzzRuns(5000, 250_000);
    const text = fc.oneof(
      fc.json({ maxDepth: 6 }),
      fc.string(),
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify({ Extra: v, Opts: v, Id: v })),
    );
    fc.assert(
      fc.property(text, fc.constantFrom(...names), (input, name) => {
        const scanner = new JsonObjectScanner(4096, 64);
        let end: number;
        try {
          end = scanner.push(Buffer.from(`${input}\n`));
        } catch (err) {
          expect(err instanceof SyntaxError || err instanceof RangeError).toBe(true);
          return;
        }
        if (end < 0) return;
        let raw: unknown;
        try {
          raw = JSON.parse(Buffer.from(`${input}\n`).subarray(0, end).toString('utf8'));
        } catch (err) {
          expect(err).toBeInstanceOf(SyntaxError);
          return;
        }
        try {
          decodeMessage(name, raw);
        } catch (err) {
          expect(err).toBeInstanceOf(TypeError);
        }
      }),
      { numRuns: runs },
    );
    reportFuzz(
      'RPC message scanner and decoder (src/protocol/tunnel/json-scanner.ts, messages.ts)',
      runs,
    );
  }, 600_000);
});
