import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  FrameError,
  FrameFlag,
  FrameParser,
  FrameType,
  decodeFrames,
  encodeData,
  encodeFrame,
  encodeFrameHeader,
  encodeGoAway,
  encodeRst,
  encodeWndInc,
  errorCodeName,
  type Frame,
} from './frame.js';

const hex = (buf: Buffer): string => buf.toString('hex').replace(/(..)/g, '$1 ').trim();

describe('frame codec', () => {
  it('encodes the byte examples of the spec', () => {
    const syn = encodeData(2, Buffer.from('ping'), FrameFlag.Syn);
    expect(hex(syn.subarray(0, 8))).toBe('00 00 04 12 00 00 00 02');
    expect(syn.subarray(8).toString()).toBe('ping');
    expect(hex(encodeWndInc(5, 1024))).toBe('00 00 04 20 00 00 00 05 00 00 04 00');
    const goAway = encodeGoAway(7, ErrorCode.Protocol, 'bad');
    expect(hex(goAway)).toBe('00 00 0b 30 00 00 00 00 00 00 00 07 00 00 00 01 62 61 64');
    expect(hex(encodeRst(9, ErrorCode.StreamCancelled))).toBe(
      '00 00 04 00 00 00 00 09 00 00 00 06',
    );
  });

  it('round-trips every frame type, with flags and the largest ids', () => {
    const frames: Frame[] = [
      {
        type: 'data',
        streamId: 3,
        flags: FrameFlag.Syn | FrameFlag.Fin,
        payload: Buffer.from('x'),
      },
      { type: 'data', streamId: 0x7fffffff, flags: 0, payload: Buffer.alloc(70_000, 7) },
      { type: 'data', streamId: 4, flags: FrameFlag.Fin, payload: Buffer.alloc(0) },
      { type: 'rst', streamId: 4, code: ErrorCode.StreamClosed },
      { type: 'wndinc', streamId: 6, increment: 0x7fffffff },
      { type: 'goaway', lastStreamId: 8, code: ErrorCode.None, message: 'bye ✓' },
    ];
    expect(decodeFrames(Buffer.concat(frames.map(encodeFrame)))).toEqual(frames);
  });

  it('parses a frame sequence split at every byte boundary', () => {
    const wire = Buffer.concat([
      encodeData(3, Buffer.from('hello'), FrameFlag.Syn),
      encodeWndInc(3, 77),
      encodeData(3, Buffer.alloc(0), FrameFlag.Fin),
      encodeRst(5, ErrorCode.StreamReset),
      encodeGoAway(3, ErrorCode.None, 'done'),
    ]);
    const whole = decodeFrames(wire);
    expect(whole.map((f) => f.type)).toEqual(['data', 'wndinc', 'data', 'rst', 'goaway']);
    for (let cut = 1; cut < wire.length; cut++) {
      expect(decodeFrames([wire.subarray(0, cut), wire.subarray(cut)])).toEqual(whole);
    }
  });

  it('hands DATA bodies on as they arrive, without waiting for the whole frame', () => {
    const chunks: number[] = [];
    const parser = new FrameParser({
      dataStart: () => {},
      dataChunk: (_id, chunk) => chunks.push(chunk.length),
      dataEnd: () => chunks.push(-1),
      rst: () => {},
      wndInc: () => {},
      goAway: () => {},
    });
    const frame = encodeData(3, Buffer.alloc(1000));
    parser.push(frame.subarray(0, 508));
    expect(chunks).toEqual([500]);
    parser.push(frame.subarray(508));
    expect(chunks).toEqual([500, 500, -1]);
  });

  it('masks the reserved top bit of stream ids', () => {
    const frame = encodeData(3, Buffer.from('a'));
    frame[4] = frame[4]! | 0x80;
    expect(decodeFrames(frame)[0]).toMatchObject({ streamId: 3 });
  });

  it.each([
    ['an unknown frame type', encodeFrameHeader(0x7, 0, 1, 0), ErrorCode.Protocol],
    ['RST with a 5-byte body', encodeFrameHeader(FrameType.Rst, 0, 1, 5), ErrorCode.FrameSize],
    [
      'WNDINC with a 3-byte body',
      encodeFrameHeader(FrameType.WndInc, 0, 1, 3),
      ErrorCode.FrameSize,
    ],
    [
      'WNDINC of 0',
      Buffer.concat([encodeFrameHeader(2, 0, 1, 4), Buffer.alloc(4)]),
      ErrorCode.Protocol,
    ],
    ['DATA on stream 0', encodeData(0, Buffer.from('x')), ErrorCode.Protocol],
    ['RST on stream 0', encodeRst(0, 1), ErrorCode.Protocol],
    ['GOAWAY on stream 5', encodeFrameHeader(FrameType.GoAway, 0, 5, 8), ErrorCode.Protocol],
  ])('rejects %s', (_name, wire, code) => {
    let thrown: unknown;
    try {
      decodeFrames(Buffer.concat([wire, Buffer.alloc(16)]));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(FrameError);
    expect((thrown as FrameError).wireCode).toBe(code);
  });

  it('ignores input after an error or a GOAWAY', () => {
    const seen: number[] = [];
    const parser = new FrameParser({
      dataStart: (id) => seen.push(id),
      dataChunk: () => {},
      dataEnd: () => {},
      rst: () => {},
      wndInc: () => {},
      goAway: () => seen.push(0),
    });
    parser.push(Buffer.concat([encodeGoAway(0, 0), encodeData(3, Buffer.from('late'))]));
    expect(seen).toEqual([0]);
    expect(parser.stopped).toBe(true);
  });

  it("reads the Rust encoder's GOAWAY whose length leaves out the 8 fixed bytes", () => {
    const wire = encodeGoAway(9, ErrorCode.Internal, '');
    wire[2] = 0; // Length = len(message) = 0
    expect(decodeFrames(wire)).toEqual([
      { type: 'goaway', lastStreamId: 9, code: ErrorCode.Internal, message: '' },
    ]);
  });

  it('names error codes', () => {
    expect(errorCodeName(ErrorCode.FlowControl)).toBe('FlowControl');
    expect(errorCodeName(1234)).toBe('Unknown(1234)');
  });
});
