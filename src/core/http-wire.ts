/**
 * The character rules of what goes into an HTTP/1.1 head (RFC 9110 §5.5, §5.6.2; RFC 9112 §3,
 * §4): tokens, field values, request targets and reason phrases. The edge's head parsers read with
 * them, and every place that writes a head checks with them what it did not read off the wire
 * (a rewritten target, a header a policy rendered, an agent's reason phrase): a CR or LF written
 * there would end a line the reader of the head did not expect, so such text is refused, never
 * cleaned. Everything works on latin1 strings: one byte is one UTF-16 unit.
 */

/** tchar (RFC 9110 §5.6.2) by character code. */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TCHAR[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TCHAR[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TCHAR[c] = 1;

/**
 * True when `text[start, end)` is a non-empty token.
 * @example isToken('Content-Type', 0, 12) // true
 */
export function isToken(text: string, start = 0, end = text.length): boolean {
  if (end <= start) return false;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || TCHAR[c] === 0) return false;
  }
  return true;
}

/**
 * True when `text[start, end)` holds only field-value bytes: HTAB, SP, visible ASCII and
 * obs-text. NUL, CR, LF, DEL and other controls are refused (RFC 9110 §5.5), and so is anything
 * past one byte (a string that cannot be written as latin1 is not what was checked).
 * @example isFieldValue('a\tb', 0, 3) // true
 */
export function isFieldValue(text: string, start = 0, end = text.length): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 ? c !== 0x09 : c === 0x7f || c > 0xff) return false;
  }
  return true;
}

/**
 * Why header `name: value` cannot be written into a head, or undefined when it can.
 * @example fieldProblem('set-cookie', 'a=1\r\nx: y') // 'a control character in the value of set-cookie'
 */
export function fieldProblem(name: string, value: string): string | undefined {
  if (!isToken(name)) return `an invalid header name ${JSON.stringify(name)}`;
  if (!isFieldValue(value)) return `a control character in the value of ${name}`;
  return undefined;
}

/**
 * Why a header list (`[name, value, …]` as Node's rawHeaders, or a record) cannot be written,
 * or undefined when every field can.
 * @example headersProblem(['x-a', '1', 'x-b', 'two\nlines']) // 'a control character in the value of x-b'
 */
export function headersProblem(
  headers: readonly string[] | Readonly<Record<string, string | number | readonly string[]>>,
): string | undefined {
  if (Array.isArray(headers)) {
    const raw = headers as readonly string[];
    for (let i = 0; i < raw.length; i += 2) {
      const problem = fieldProblem(raw[i]!, raw[i + 1]!);
      if (problem) return problem;
    }
    return undefined;
  }
  for (const [name, value] of Object.entries(headers)) {
    const values = typeof value === 'object' ? value : [String(value)];
    for (const one of values) {
      const problem = fieldProblem(name, one);
      if (problem) return problem;
    }
  }
  return undefined;
}

/**
 * True when a reason phrase can be written in a status line: HTAB, SP, visible ASCII, obs-text
 * (RFC 9112 §4).
 * @example isReasonPhrase('Not Found') // true
 */
export function isReasonPhrase(reason: string): boolean {
  return isFieldValue(reason);
}

/**
 * True when `target` can be written as a request-line's target: no whitespace, no control
 * character, nothing past one byte (RFC 9112 §3: the line is split on single spaces).
 * @example isTargetText('/a?b=1') // true
 */
export function isTargetText(target: string): boolean {
  if (target.length === 0) return false;
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || c > 0xff) return false;
  }
  return true;
}
