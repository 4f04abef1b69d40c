import { describe, expect, it } from 'vitest';
import type { BodyReplacement } from '../../../policy/index.js';
import { compileRegex } from '../../../policy/regex.js';
import { bodyReplacer, replaceAllIn, ReplaceStage, sseReplacer } from './body-rewrite.js';

/** `$1`-style replacement without a policy: `to` with `$N` swapped for the groups. */
const r = (from: string, to: string, field?: 'data' | 'retry'): BodyReplacement => ({
  regex: compileRegex(from),
  replace: (groups) => to.replace(/\$(\d)/g, (_, n: string) => groups[Number(n)] ?? ''),
  field,
});

/** Run `text` through a stage split into pieces of `size` characters. */
function streamed(replacement: BodyReplacement, text: string, size: number, window: number) {
  const stage = new ReplaceStage(replacement, window);
  let out = '';
  for (let i = 0; i < text.length; i += size) out += stage.push(text.slice(i, i + size), false);
  return out + stage.push('', true);
}

/** Feed a transform `pieces` (each a write) and collect what it gives, in order. */
async function through(
  transform: ReturnType<typeof bodyReplacer>,
  pieces: (string | Buffer)[],
): Promise<string> {
  const out: Buffer[] = [];
  transform.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((resolve) => transform.once('end', resolve));
  for (const p of pieces) transform.write(p);
  transform.end();
  await done;
  return Buffer.concat(out).toString('utf8');
}

describe('ReplaceStage (whole bodies)', () => {
  it('gives what a whole-text replace gives, at every split of the input', () => {
    const text = 'key=abc123; key=zz9 and key= none; key=Q'.repeat(20);
    const rep = r('key=([a-zA-Z0-9]+)', 'key=<$1>');
    const whole = replaceAllIn(text, [rep]);
    expect(whole).toContain('key=<abc123>');
    for (const size of [1, 2, 3, 7, 16, 101]) {
      expect(streamed(rep, text, size, 32)).toBe(whole);
    }
  });

  it('follows Go ReplaceAll for empty matches', () => {
    expect(replaceAllIn('baaac', [r('a*', 'X')])).toBe('XbXcX');
    expect(streamed(r('a*', 'X'), 'baaac', 1, 1)).toBe('XbXcX');
  });

  it('keeps ^ at the start of the body and \\b aware of what came before', () => {
    const text = 'ab'.repeat(50);
    expect(streamed(r('^ab', 'X'), text, 3, 4)).toBe(`X${'ab'.repeat(49)}`);
    expect(streamed(r('\\bb', 'X'), 'a b ab'.repeat(20), 2, 4)).toBe('a X ab'.repeat(20));
  });

  it('never splits a surrogate pair', async () => {
    const text = '😀'.repeat(5000);
    const out = await through(bodyReplacer([r('x', 'y')], 7), [Buffer.from(text)]);
    expect(out).toBe(text);
  });

  it('cuts a match that keeps growing past twice the window, holding no more', () => {
    const stage = new ReplaceStage(r('a+', 'X'), 16);
    let out = '';
    for (let i = 0; i < 100; i++) out += stage.push('a'.repeat(100), false);
    expect(out.length).toBeGreaterThan(0);
    out += stage.push('', true);
    expect(out).toMatch(/^X+$/);
  });

  it('decodes UTF-8 split across chunks', async () => {
    const body = Buffer.from('héllo wörld');
    const pieces = [...body].map((b) => Buffer.from([b]));
    expect(await through(bodyReplacer([r('ö', 'o')], 4), pieces)).toBe('héllo world');
  });
});

describe('sseReplacer', () => {
  it('rewrites joined data lines and retry, keeping other fields and line ends', async () => {
    const sse = sseReplacer([r('secret', '***'), r('^(\\d+)$', '$10', 'retry')]);
    const out = await through(sse, [
      'event: a\r\nid: 1\r\ndata: one secret\r\ndata: two\r\n\r\n',
      ': comment\nretry: 5\ndata:plain\n\n',
    ]);
    expect(out).toBe(
      'event: a\r\nid: 1\r\ndata: one ***\r\ndata: two\r\n\r\n: comment\nretry: 50\ndata:plain\n\n',
    );
  });

  it('matches across the data lines of an event and handles a CRLF split between chunks', async () => {
    const sse = sseReplacer([r('a\\nb', 'a b')]);
    expect(await through(sse, ['data: a\r', '\ndata: b\r\n\r', '\n'])).toBe('data: a b\r\n\r\n');
  });

  it('passes an event over the limit unchanged', async () => {
    const sse = sseReplacer([r('x', 'y')], 10);
    expect(await through(sse, ['data: xxxxxxxxxxxx', 'xx\n\ndata: x\n\n'])).toBe(
      'data: xxxxxxxxxxxxxx\n\ndata: y\n\n',
    );
  });
});
