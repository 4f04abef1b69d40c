/**
 * Which characters a piece of user text may hold. Names and descriptions are shown to people (in
 * the API, logs, terminals, the dashboard), so characters that are invisible or that reorder what
 * surrounds them are refused: a bidirectional override can make 'gnp.exe' read as 'exe.png', a
 * zero-width space makes two names that look the same differ, and NUL cannot be stored in
 * PostgreSQL at all (it fails the insert) while SQLite keeps it.
 *
 * @example textProblem('sitea\u202Eagents', 'name')
 * // 'must not contain control, bidirectional-formatting or zero-width characters: found U+202E (a bidirectional-formatting character) at character 6'
 */

/** `name`: one line of visible text. `text`: free text, which may also break lines and indent. */
export type TextKind = 'name' | 'text';

/**
 * Every character that is not plain visible text: controls (Cc: C0, DEL, C1), format characters
 * (Cf: the bidirectional controls, zero-width characters, the byte-order mark, soft hyphen),
 * surrogates (Cs, only ever unpaired in a JS string: invalid Unicode that PostgreSQL would turn into
 * U+FFFD), and the line and paragraph separators (Zl, Zp).
 */
export const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;

/** What free text may keep of the above: newline and tab. */
const TEXT_ALLOWED = new Set(['\n', '\t']);

const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;
const ZERO_WIDTH = /[\u200B-\u200D\u2060\uFEFF]/u;

/** `U+202E`: how messages name a code point. */
function codePointName(ch: string): string {
  return `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

function describe(ch: string): string {
  if (BIDI.test(ch)) return 'a bidirectional-formatting character';
  if (ZERO_WIDTH.test(ch)) return 'a zero-width character';
  if (/\p{Cc}/u.test(ch)) return 'a control character';
  if (/\p{Cs}/u.test(ch)) return 'an unpaired surrogate, which is not valid Unicode';
  if (/[\p{Zl}\p{Zp}]/u.test(ch)) return 'a line or paragraph separator';
  return 'an invisible formatting character';
}

const RULES: Record<TextKind, string> = {
  name: 'must not contain control, bidirectional-formatting or zero-width characters',
  text: 'must not contain control characters other than newline and tab, nor bidirectional-formatting or zero-width characters',
};

/**
 * The rule `text` breaks as a message tail (`<rule>: found U+… (…) at character n`), or undefined
 * when every character is allowed. Positions count code points from 1.
 */
export function textProblem(text: string, kind: TextKind): string | undefined {
  // Fast path: most text has nothing to refuse.
  if (!INVISIBLE.test(text)) return undefined;
  let position = 0;
  for (const ch of text) {
    position++;
    if (!INVISIBLE.test(ch)) continue;
    if (kind === 'text' && TEXT_ALLOWED.has(ch)) continue;
    return `${RULES[kind]}: found ${codePointName(ch)} (${describe(ch)}) at character ${position}`;
  }
  return undefined;
}

/**
 * What any string input may not hold, whatever the field: NUL (PostgreSQL cannot store it, so it
 * would fail the query) and unpaired surrogates (invalid Unicode, silently replaced when stored).
 */
export function storableProblem(text: string): string | undefined {
  const m = /[\0\p{Cs}]/u.exec(text);
  if (!m) return undefined;
  const position = [...text.slice(0, m.index)].length + 1;
  return `must not contain U+0000 (NUL) or unpaired surrogates: found ${codePointName(m[0])} (${describe(m[0])}) at character ${position}`;
}
