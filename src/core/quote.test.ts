import { describe, expect, it } from 'vitest';
import { quote, QUOTE_MAX_CHARS, shorten, spellInvisible } from './quote.js';

describe('quote', () => {
  it('quotes short input as it is', () => {
    expect(quote('localhost:29999')).toBe("'localhost:29999'");
    expect(quote('a=b', '"')).toBe('"a=b"');
  });

  it('keeps only the first 60 characters of long input, then …', () => {
    const long = 'x'.repeat(1024 * 1024);
    expect(quote(long)).toBe(`'${'x'.repeat(QUOTE_MAX_CHARS)}…'`);
    expect(quote('y'.repeat(60))).toBe(`'${'y'.repeat(60)}'`);
    expect(quote('y'.repeat(61))).toBe(`'${'y'.repeat(60)}…'`);
  });

  it('counts code points and never splits a surrogate pair', () => {
    const emoji = '😀'.repeat(100);
    expect(shorten(emoji)).toBe(`${'😀'.repeat(60)}…`);
    expect(shorten(emoji, 3)).toBe('😀😀😀…');
  });

  it('spells out invisible characters so input cannot rearrange the message', () => {
    expect(quote('evil\u202Etxt.exe')).toBe("'evil\\u{202E}txt.exe'");
    expect(quote('a\0b\u200Bc')).toBe("'a\\u{0}b\\u{200B}c'");
    expect(spellInvisible('one\ntwo', new Set(['\n']))).toBe('one\ntwo');
    expect(spellInvisible('one\ntwo')).toBe('one\\u{A}two');
  });
});
