/**
 * Find-replace on message bodies as they stream (request-body-find-replace,
 * response-body-find-replace, sse-find-replace): the policy records the replacements, the
 * ingress pipes the body through one of these transforms. Nothing here holds a whole body.
 *
 * Bodies are decoded as UTF-8 (the actions only ask for it on textual, unencoded bodies whose
 * charset is UTF-8 or ASCII) and each replacement runs as its own stage, in order, so a later
 * replacement sees the output of an earlier one.
 *
 * Whole bodies: a stage holds back the last {@link MATCH_WINDOW} characters it has seen. A match
 * is replaced once that many characters after it have arrived (or the body ended), so a match
 * that spans chunks is found and a regex that would prefer a longer alternative sees it. A match
 * still growing after {@link MATCH_WINDOW} characters is replaced as found then (the rest can
 * match again), so what one regex replaces in a body over 64 KiB can differ from a whole-body
 * replace only for matches that long. A stage never holds more than twice the window.
 *
 * Event streams: lines are read as they come and each event is held only until its blank line,
 * then written with its `data` (its data lines joined by `\n`, as a client sees them) and
 * `retry` values replaced. An event over {@link SSE_EVENT_LIMIT} characters is passed on
 * unchanged as it streams.
 */
import { StringDecoder } from 'node:string_decoder';
import { Transform, type TransformCallback } from 'node:stream';
import type { BodyReplacement } from '../../../policy/index.js';

/** Characters of lookahead a whole-body match is decided with. */
export const MATCH_WINDOW = 64 * 1024;
/** Text a stage collects before it scans again, so tiny chunks do not rescan the window each. */
const SCAN_STEP = 8 * 1024;
/** The longest event sse-find-replace holds to rewrite; longer ones pass unchanged. */
export const SSE_EVENT_LIMIT = 1024 * 1024;

/** The groups of the match a matcher found: `[0]` the match, then each group (undefined if unset). */
function groupsOf(m: ReturnType<BodyReplacement['regex']['matcher']>): (string | undefined)[] {
  const out: (string | undefined)[] = [];
  for (let g = 0; g <= m.groupCount(); g++) out.push(m.group(g) ?? undefined);
  return out;
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;

/**
 * One replacement over a text stream: push text in, get the text that is decided out.
 * @example const s = new ReplaceStage(r, 16); s.push('abc', false) + s.push('def', true);
 */
export class ReplaceStage {
  /** Text seen and not yet written. */
  private held = '';
  /** The last characters written, so `^`, `\b` and `(?m)^` see what came before `held`. */
  private before = '';
  /** `held` starts right after a non-empty match (an empty match there is not a new one). */
  private afterMatch = false;
  /** Length of `held` at the last scan. */
  private scanned = 0;

  constructor(
    private readonly replacement: BodyReplacement,
    private readonly window: number = MATCH_WINDOW,
  ) {}

  /** Feed `text`; `final` says the body ended. Returns the text now decided. */
  push(text: string, final: boolean): string {
    this.held += text;
    if (!final && (this.held.length < this.window || this.held.length - this.scanned < SCAN_STEP))
      return '';
    const input = this.before + this.held;
    const base = this.before.length;
    const len = input.length;
    // A match counts once `window` characters after it were seen; a longer one is cut.
    const decided = final ? len : len - this.window;
    const matcher = this.replacement.regex.matcher(input);
    let out = '';
    let pos = base;
    let afterMatch = this.afterMatch;
    let holdFrom = len;
    while (pos <= len) {
      if (!matcher.find(pos)) {
        holdFrom = Math.max(pos, decided);
        break;
      }
      const start = matcher.start();
      const end = matcher.end();
      if (start >= decided && !final) {
        holdFrom = Math.max(pos, decided);
        break;
      }
      if (end > decided && !final && len - start <= 2 * this.window) {
        // Still being decided: keep it (and what follows) for the next scan.
        holdFrom = start;
        break;
      }
      if (start === end && start === pos && afterMatch) {
        // Go's rule: an empty match right after a match is not another one.
        if (pos === len) break;
        out += input[pos];
        pos++;
        afterMatch = false;
        continue;
      }
      out += input.slice(pos, start) + this.replacement.replace(groupsOf(matcher));
      if (start === end) {
        if (end === len) {
          pos = len;
          afterMatch = false;
          break;
        }
        out += input[end];
        pos = end + 1;
        afterMatch = false;
      } else {
        pos = end;
        afterMatch = true;
      }
    }
    if (final) holdFrom = len;
    if (holdFrom < pos) holdFrom = pos;
    // Never split a surrogate pair between what is written and what is held.
    if (holdFrom > pos && holdFrom < len && isHighSurrogate(input.charCodeAt(holdFrom - 1)))
      holdFrom--;
    if (holdFrom > pos) {
      out += input.slice(pos, holdFrom);
      afterMatch = false;
    }
    this.afterMatch = afterMatch;
    this.held = input.slice(holdFrom);
    this.before = input.slice(Math.max(0, holdFrom - 2), holdFrom);
    this.scanned = this.held.length;
    return out;
  }
}

/**
 * Every match of each replacement in `text`, replaced in order (Go's ReplaceAll semantics).
 * @example replaceAllIn('a1b22', [{ regex: compileRegex('[0-9]+'), replace: () => '#' }]) // 'a#b#'
 */
export function replaceAllIn(text: string, replacements: readonly BodyReplacement[]): string {
  let out = text;
  for (const r of replacements) out = new ReplaceStage(r).push(out, true);
  return out;
}

/**
 * A body transform that replaces every match of `replacements`, in order, holding back at most
 * twice {@link MATCH_WINDOW} characters per replacement.
 * @example up.pipe(bodyReplacer(replacements)).pipe(res);
 */
export function bodyReplacer(
  replacements: readonly BodyReplacement[],
  window: number = MATCH_WINDOW,
): Transform {
  const decoder = new StringDecoder('utf8');
  const stages = replacements.map((r) => new ReplaceStage(r, window));
  const run = (text: string, final: boolean): string => {
    let out = text;
    for (const stage of stages) out = stage.push(out, final);
    return out;
  };
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      const out = run(decoder.write(chunk), false);
      done(null, out.length > 0 ? Buffer.from(out, 'utf8') : undefined);
    },
    flush(done: TransformCallback) {
      const out = run(decoder.end(), true);
      done(null, out.length > 0 ? Buffer.from(out, 'utf8') : undefined);
    },
  });
}

interface Line {
  text: string;
  eol: string;
}

/** The field name and value of an event-stream line (`data: x` → ['data', 'x']). */
function fieldOf(text: string): [string, string] {
  const colon = text.indexOf(':');
  if (colon < 0) return [text, ''];
  const value = text.slice(colon + 1);
  return [text.slice(0, colon), value.startsWith(' ') ? value.slice(1) : value];
}

/** An event's lines with its `data` and `retry` values replaced; the lines as they were when nothing matched. */
function rewriteEvent(lines: readonly Line[], replacements: readonly BodyReplacement[]): string {
  const forData = replacements.filter((r) => (r.field ?? 'data') === 'data');
  const forRetry = replacements.filter((r) => r.field === 'retry');
  const dataLines = lines.filter((l) => fieldOf(l.text)[0] === 'data');
  let newData: string | undefined;
  if (dataLines.length > 0 && forData.length > 0) {
    const data = dataLines.map((l) => fieldOf(l.text)[1]).join('\n');
    const replaced = replaceAllIn(data, forData);
    if (replaced !== data) newData = replaced;
  }
  let out = '';
  let dataWritten = false;
  for (const line of lines) {
    const [field, value] = fieldOf(line.text);
    if (field === 'data' && newData !== undefined) {
      if (dataWritten) continue;
      dataWritten = true;
      for (const piece of newData.split(/\r\n|\r|\n/)) out += `data: ${piece}${line.eol}`;
    } else if (field === 'retry' && forRetry.length > 0) {
      const replaced = replaceAllIn(value, forRetry);
      out += replaced === value ? line.text + line.eol : `retry: ${replaced}${line.eol}`;
    } else {
      out += line.text + line.eol;
    }
  }
  return out;
}

/**
 * A `text/event-stream` transform that rewrites each event as soon as its blank line arrives.
 * @example up.pipe(sseReplacer(replacements)).pipe(res);
 */
export function sseReplacer(
  replacements: readonly BodyReplacement[],
  eventLimit: number = SSE_EVENT_LIMIT,
): Transform {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  let event: Line[] = [];
  let eventSize = 0;
  /** Over the limit: the rest of this event passes unchanged as it comes. */
  let passing = false;
  /** The last line ended in a CR at a chunk's end; a LF that starts the next chunk belongs to it. */
  let crPending = false;
  /** Part of the current line was already passed on (so its end is not a blank line). */
  let lineStarted = false;

  const feed = (text: string, final: boolean): string => {
    let out = '';
    let i = 0;
    if (crPending && text.length > 0) {
      crPending = false;
      if (text[0] === '\n') {
        const last = event[event.length - 1];
        if (last && !passing) last.eol += '\n';
        else out += '\n';
        i = 1;
      }
    }
    const endLine = (text: string, eol: string): void => {
      if (passing) {
        out += text + eol;
        if (text === '' && !lineStarted) passing = false;
        lineStarted = false;
        return;
      }
      if (text === '') {
        out += rewriteEvent(event, replacements) + eol;
        event = [];
        eventSize = 0;
        return;
      }
      event.push({ text, eol });
      eventSize += text.length + eol.length;
    };
    while (i < text.length) {
      const lf = text.indexOf('\n', i);
      const cr = text.indexOf('\r', i);
      const at = cr >= 0 && (lf < 0 || cr < lf) ? cr : lf;
      if (at < 0) {
        partial += text.slice(i);
        break;
      }
      let eol = text[at]!;
      if (eol === '\r') {
        if (at + 1 < text.length) {
          if (text[at + 1] === '\n') eol = '\r\n';
        } else {
          crPending = true;
        }
      }
      endLine(partial + text.slice(i, at), eol);
      partial = '';
      i = at + eol.length;
    }
    if (!passing && eventSize + partial.length > eventLimit) {
      // Too big to hold: what is held goes on as it was, and so does the rest of this event.
      for (const line of event) out += line.text + line.eol;
      event = [];
      eventSize = 0;
      passing = true;
    }
    if (passing && partial.length > 0) {
      out += partial;
      partial = '';
      lineStarted = true;
    }
    if (final) {
      // A stream that ends mid-event: clients drop such an event; pass it on as it was.
      for (const line of event) out += line.text + line.eol;
      out += partial;
      event = [];
      partial = '';
    }
    return out;
  };

  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      const out = feed(decoder.write(chunk), false);
      done(null, out.length > 0 ? Buffer.from(out, 'utf8') : undefined);
    },
    flush(done: TransformCallback) {
      const out = feed(decoder.end(), true);
      done(null, out.length > 0 ? Buffer.from(out, 'utf8') : undefined);
    },
  });
}
