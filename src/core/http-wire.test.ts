import { describe, expect, it } from 'vitest';
import { fieldProblem, headersProblem, isReasonPhrase, isTargetText } from './http-wire.js';

describe('what may be written into an HTTP/1.1 head', () => {
  it.each([
    ['x-a', 'plain value', undefined],
    ['x-a', 'tab\tand obs-text \u00e9', undefined],
    ['x-a', 'x\r\nSet-Cookie: injected=1', /control character in the value of x-a/],
    ['x-a', 'nul\u0000', /control character/],
    ['x-a', 'del\u007f', /control character/],
    ['x-a', 'wide \u2028', /control character/],
    ['x a', 'v', /invalid header name/],
    ['x:a', 'v', /invalid header name/],
  ])('%j: %j', (name, value, problem) => {
    const found = fieldProblem(name, value);
    if (problem === undefined) expect(found).toBeUndefined();
    else expect(found).toMatch(problem);
  });

  it('checks header lists in both shapes, every value of a repeated header', () => {
    expect(headersProblem(['a', '1', 'b', '2\n'])).toMatch(/value of b/);
    expect(headersProblem({ a: '1', 'set-cookie': ['x=1', 'y=2\r'] })).toMatch(/set-cookie/);
    expect(headersProblem({ a: 1, b: ['ok'] })).toBeUndefined();
  });

  it('refuses a request target or reason phrase that would split its line', () => {
    expect(isTargetText('/a?b=%0d%0a')).toBe(true);
    expect(isTargetText('/a b')).toBe(false);
    expect(isTargetText('/a\r\nGET /smuggled')).toBe(false);
    expect(isTargetText('')).toBe(false);
    expect(isReasonPhrase('Not Found')).toBe(true);
    expect(isReasonPhrase('O\u0001K')).toBe(false);
  });
});
