import { INVISIBLE } from './text-rules.js';

/**
 * How error messages show user input: short, and with invisible characters spelled out. A message
 * that echoes a whole 1 MiB value back makes every reply (and every log line) as large as the
 * attack, and one that echoes a bidirectional override lets the input rearrange the message.
 *
 * @example quote('x'.repeat(100)) // the first 60 x's between quotes, with '…' before the closing one
 * @example quote('a\u202Eb') // "'a\\u{202E}b'"
 */

/** How many characters of user input a message quotes. */
export const QUOTE_MAX_CHARS = 60;

/**
 * The first `max` code points of `text`, then '…' when anything was cut. Never splits a surrogate
 * pair.
 */
export function shorten(text: string, max = QUOTE_MAX_CHARS): string {
  // Cheap check first: a string of at most `max` UTF-16 units has at most `max` code points.
  if (text.length <= max) return text;
  let out = '';
  let count = 0;
  for (const ch of text) {
    if (count === max) return `${out}…`;
    out += ch;
    count++;
  }
  return out;
}

/**
 * `text` with every control, format, separator or unpaired-surrogate character written as
 * `\u{XXXX}`; `keep` lists characters to leave as they are.
 */
export function spellInvisible(text: string, keep: ReadonlySet<string> = new Set()): string {
  if (!INVISIBLE.test(text)) return text;
  let out = '';
  for (const ch of text) {
    out +=
      INVISIBLE.test(ch) && !keep.has(ch)
        ? `\\u{${ch.codePointAt(0)!.toString(16).toUpperCase()}}`
        : ch;
  }
  return out;
}

/**
 * User input for a message: shortened to 60 characters, invisible characters spelled out, between
 * `mark`s (single quotes unless told).
 */
export function quote(text: string, mark = "'"): string {
  return `${mark}${spellInvisible(shorten(text))}${mark}`;
}
