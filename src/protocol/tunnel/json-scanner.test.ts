import { describe, expect, it } from 'vitest';
import { JsonObjectScanner } from './json-scanner.js';

/** Feed `parts` in order; return where (part index, offset) the first object ends. */
function scan(parts: Buffer[], scanner = new JsonObjectScanner()): [number, number] | undefined {
  for (let i = 0; i < parts.length; i++) {
    const end = scanner.push(parts[i]!);
    if (end >= 0) return [i, end];
  }
  return undefined;
}

const TRICKY = JSON.stringify({
  Version: ['3', '2'],
  Extra: {
    Msg: 'braces } { inside "quotes" and \\ backslashes \\" and }}}',
    Nested: { Deep: [{ a: '{' }, { b: '}' }] },
    Unicode: 'ünïcödé ✓ 😀',
  },
  Tail: '\\',
});

describe('JsonObjectScanner', () => {
  it('finds the end of an object whose strings hold braces and escaped quotes', () => {
    const wire = Buffer.from(TRICKY + '{"next":1}');
    expect(scan([wire])).toEqual([0, Buffer.byteLength(TRICKY)]);
  });

  it('finds the same end when the bytes are split at every boundary', () => {
    const wire = Buffer.from(TRICKY + '\n');
    const expectedEnd = Buffer.byteLength(TRICKY);
    for (let cut = 1; cut < wire.length; cut++) {
      const found = scan([wire.subarray(0, cut), wire.subarray(cut)]);
      const absolute = found![0] === 0 ? found![1] : cut + found![1];
      expect(absolute).toBe(expectedEnd);
    }
  });

  it('finds the end when fed one byte at a time', () => {
    const wire = Buffer.from(TRICKY);
    const bytes = [...wire].map((b) => Buffer.from([b]));
    expect(scan(bytes)).toEqual([wire.length - 1, 1]);
  });

  it('reports -1 until the object is complete, across many chunks', () => {
    const scanner = new JsonObjectScanner();
    expect(scanner.push(Buffer.from('  \n{"a":'))).toBe(-1);
    expect(scanner.push(Buffer.from('"}\\""'))).toBe(-1);
    expect(scanner.push(Buffer.from(',"b":{}'))).toBe(-1);
    expect(scanner.push(Buffer.from('}rest'))).toBe(1);
  });

  it('scans consecutive objects, skipping whitespace between them', () => {
    const scanner = new JsonObjectScanner();
    const wire = Buffer.from('{"a":1}\n {"b":"}"}');
    const first = scanner.push(wire);
    expect(first).toBe(7);
    expect(scanner.push(wire.subarray(first))).toBe(wire.length - first);
  });

  it('rejects input that is not an object', () => {
    expect(() => new JsonObjectScanner().push(Buffer.from('[1,2]'))).toThrow(SyntaxError);
    expect(() => new JsonObjectScanner().push(Buffer.from(' "x"'))).toThrow(SyntaxError);
  });

  it('refuses objects longer than its limit', () => {
    const scanner = new JsonObjectScanner(16);
    expect(scanner.push(Buffer.from('{"a":"0123'))).toBe(-1);
    expect(() => scanner.push(Buffer.from('4567890'))).toThrow(RangeError);
  });

  it('refuses an object over its limit that ends within one chunk, and takes one at it', () => {
    expect(() => new JsonObjectScanner(16).push(Buffer.from('{"a":"0123456789"}'))).toThrow(
      /longer than 16 bytes/,
    );
    const scanner = new JsonObjectScanner(16);
    expect(scanner.push(Buffer.from('{"a":"'))).toBe(-1);
    expect(() => scanner.push(Buffer.from('0123456789"}'))).toThrow(RangeError);
    expect(new JsonObjectScanner(16).push(Buffer.from('{"a":"01234567"}'))).toBe(16);
  });

  it('refuses nesting deeper than its limit, arrays and objects alike, before any parse', () => {
    const deepArrays = `{"Opts":${'['.repeat(64)}`;
    expect(() => new JsonObjectScanner().push(Buffer.from(deepArrays))).toThrow(
      /nested deeper than 64 levels/,
    );
    const deepObjects = '{"a":'.repeat(65);
    expect(() => new JsonObjectScanner().push(Buffer.from(deepObjects))).toThrow(RangeError);
    const atLimit = `{"a":${'['.repeat(62)}{}${']'.repeat(62)}}`;
    expect(new JsonObjectScanner().push(Buffer.from(atLimit))).toBe(atLimit.length);
    // Brackets inside strings do not count.
    const quoted = `{"a":"${'['.repeat(500)}"}`;
    expect(new JsonObjectScanner().push(Buffer.from(quoted))).toBe(quoted.length);
  });
});
