import { describe, expect, it } from 'vitest';
import { deeperThan } from './json-depth.js';

describe('deeperThan', () => {
  it('passes bodies within the depth and scalars at any level', () => {
    expect(deeperThan({ a: { b: 1 } }, 2)).toBeUndefined();
    expect(deeperThan('text', 1)).toBeUndefined();
    expect(deeperThan({ a: [1, 2, { c: 'x' }] }, 3)).toBeUndefined();
  });

  it('names the path to the first container past the limit', () => {
    expect(deeperThan({ a: { b: [] } }, 2)).toEqual(['a', 'b']);
    expect(deeperThan({ ok: 1, list: [0, [[]]] }, 3)).toEqual(['list', 1, 0]);
  });

  it('walks a million levels without overflowing the stack', () => {
    let deep: unknown = [];
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    expect(deeperThan(deep, 64)).toHaveLength(64);
  });
});
