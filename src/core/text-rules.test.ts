import { describe, expect, it } from 'vitest';
import { BIDI, ZERO_WIDTH } from '../../test/support/text-fixtures.js';
import { storableProblem, textProblem } from './text-rules.js';

/** C0 and C1 controls and DEL; BIDI and ZERO_WIDTH are every other character issue 10 names. */
const CONTROLS = ['\0', '\u0001', '\u001B', '\r', '\u007F', '\u0080', '\u0085', '\u009F'];

describe('textProblem', () => {
  it('accepts ordinary names and text in any script, emoji included', () => {
    for (const kind of ['name', 'text'] as const) {
      for (const ok of [
        'sitea-agents',
        'Café bots',
        '東京 エージェント',
        'עברית',
        'robots 🤖',
        '',
      ]) {
        expect(textProblem(ok, kind)).toBeUndefined();
      }
    }
  });

  it('refuses bidirectional-formatting characters, naming the code point and position', () => {
    for (const ch of BIDI) {
      const problem = textProblem(`ab${ch}cd`, 'name');
      expect(problem).toContain('a bidirectional-formatting character');
      expect(problem).toContain('at character 3');
      expect(textProblem(`ab${ch}cd`, 'text')).toContain('a bidirectional-formatting character');
    }
    expect(textProblem('gnp\u202Eexe', 'name')).toBe(
      'must not contain control, bidirectional-formatting or zero-width characters: found U+202E (a bidirectional-formatting character) at character 4',
    );
  });

  it('refuses zero-width characters and the byte-order mark', () => {
    for (const ch of ZERO_WIDTH) {
      expect(textProblem(`a${ch}`, 'name')).toContain('a zero-width character');
      expect(textProblem(`a${ch}`, 'text')).toContain('a zero-width character');
    }
  });

  it('refuses C0 and C1 controls and DEL in both kinds', () => {
    for (const ch of CONTROLS) {
      expect(textProblem(`x${ch}`, 'name')).toContain('a control character');
      expect(textProblem(`x${ch}`, 'text')).toContain('a control character');
    }
  });

  it('lets text break lines and indent, but not names', () => {
    expect(textProblem('line one\n\tline two', 'text')).toBeUndefined();
    expect(textProblem('two\nlines', 'name')).toContain('found U+000A (a control character)');
    expect(textProblem('tab\there', 'name')).toContain('found U+0009');
    expect(textProblem('a\u2028b', 'text')).toContain('a line or paragraph separator');
  });

  it('refuses unpaired surrogates and counts positions in code points', () => {
    expect(textProblem('a\uD800b', 'name')).toContain('U+D800 (an unpaired surrogate');
    expect(textProblem('😀😀\u200B', 'name')).toContain('at character 3');
  });
});

describe('storableProblem', () => {
  it('refuses NUL and unpaired surrogates only', () => {
    expect(storableProblem('bot_\0x')).toBe(
      'must not contain U+0000 (NUL) or unpaired surrogates: found U+0000 (a control character) at character 5',
    );
    expect(storableProblem('\uDC00')).toContain('U+DC00');
    for (const ok of ['{"a":1}', 'tab\tnew\nline', '\u202E', '😀']) {
      expect(storableProblem(ok)).toBeUndefined();
    }
  });
});
