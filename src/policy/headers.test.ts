import { describe, expect, it } from 'vitest';
import {
  applyHeaderChanges,
  caseInsensitiveLookups,
  canonicalHeaderName,
  firstHeader,
  HeaderEdits,
  headerMap,
  headerValues,
  isHeaderName,
  NO_HEADER_CHANGES,
} from './headers.js';

describe('HeaderEdits', () => {
  it('starts empty and shares the empty changes', () => {
    const edits = new HeaderEdits();
    expect(edits.empty).toBe(true);
    expect(edits.changes()).toBe(NO_HEADER_CHANGES);
  });

  it('keeps the net effect of a sequence: remove drops earlier adds of the name', () => {
    const edits = new HeaderEdits();
    edits.add('X-A', '1');
    edits.add('x-b', '2');
    edits.remove('x-a');
    edits.add('x-a', '3');
    expect(edits.changes()).toEqual({
      remove: ['x-a'],
      add: [
        ['x-b', '2'],
        ['x-a', '3'],
      ],
    });
  });

  it('keeps a value as rendered: the edge refuses control characters where it writes the head', () => {
    const edits = new HeaderEdits();
    edits.add('x-a', 'one\r\nx-injected: yes\u0000');
    expect(edits.changes().add).toEqual([['x-a', 'one\r\nx-injected: yes\u0000']]);
  });
});

describe('applyHeaderChanges', () => {
  it('removes every case of a name, then appends, making lists of repeated names', () => {
    const headers: Record<string, string | string[] | number | undefined> = {
      Host: 'a',
      'X-Drop': '1',
      'x-keep': '2',
      'content-length': 5,
    };
    applyHeaderChanges(headers, {
      remove: ['x-drop', 'content-length'],
      add: [
        ['x-keep', '3'],
        ['x-new', '4'],
        ['x-new', '5'],
      ],
    });
    expect(headers).toEqual({ Host: 'a', 'x-keep': ['2', '3'], 'x-new': ['4', '5'] });
  });
});

describe('header helpers', () => {
  it('builds the CEL header map with changes applied', () => {
    const map = headerMap(
      { 'x-a': '1', 'set-cookie': ['a', 'b'], 'content-length': 10, absent: undefined },
      {
        remove: ['x-a'],
        add: [
          ['x-a', '2'],
          ['set-cookie', 'c'],
        ],
      },
    );
    expect([...map]).toEqual([
      ['set-cookie', ['a', 'b', 'c']],
      ['content-length', ['10']],
      ['x-a', ['2']],
    ]);
  });

  it('reads a raw header list as the header object built from it: repeats joined, set-cookie a list', () => {
    const raw = ['Host', 'a', 'X-A', '1', 'x-a', '2', 'Set-Cookie', 'c=1', 'set-cookie', 'd=2'];
    const changes = { remove: ['host'], add: [['x-b', '3']] as const };
    expect([...headerMap(raw, changes)]).toEqual([
      ['x-a', ['1, 2']],
      ['set-cookie', ['c=1', 'd=2']],
      ['x-b', ['3']],
    ]);
    expect(headerValues(raw, 'x-a')).toEqual(['1, 2']);
    expect(headerValues(raw, 'set-cookie')).toEqual(['c=1', 'd=2']);
    expect(headerValues(raw, 'x-none')).toEqual([]);
    expect(headerValues({ 'x-a': ['1', '2'], n: 3 }, 'n')).toEqual(['3']);
    expect(firstHeader(raw, 'X-A')).toBe('1, 2');
    expect(firstHeader(raw, 'set-cookie')).toBe('c=1');
    expect(firstHeader(raw, 'x-none')).toBeUndefined();
  });

  it('finds the first value of a header in any case', () => {
    expect(firstHeader({ 'Content-Type': 'text/html' }, 'content-type')).toBe('text/html');
    expect(firstHeader({ accept: ['a', 'b'] }, 'Accept')).toBe('a');
    expect(firstHeader({}, 'x')).toBeUndefined();
  });

  it('looks keys up in any case, sharing the lookups of one normalizer between maps', () => {
    const lower = (key: string) => key.toLowerCase();
    const a = caseInsensitiveLookups(new Map([['x-a', 1]]), lower);
    const b = caseInsensitiveLookups(new Map([['x-b', 2]]), lower);
    expect([a.get('X-A'), a.has('X-a'), a.get('x-b'), b.get('X-B'), b.has('x-a')]).toEqual([
      1,
      true,
      undefined,
      2,
      false,
    ]);
    const own = (map: Map<string, number>) => Object.getOwnPropertyDescriptor(map, 'get')?.value;
    expect(own(a)).toBe(own(b));
  });

  it('names headers canonically and checks header names', () => {
    expect(canonicalHeaderName('x-forwarded-FOR')).toBe('X-Forwarded-For');
    expect(isHeaderName('X-Burrow_1')).toBe(true);
    expect(isHeaderName('bad name')).toBe(false);
    expect(isHeaderName('a:b')).toBe(false);
  });
});
