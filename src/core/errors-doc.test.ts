import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CODES, MUX_WIRE_CODES } from './errors.js';

/** docs/errors.md must explain every error code Burrow can emit. */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SRC = join(ROOT, 'src');
const DOC = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');

// A whole code: `ERR_NGROK_22xx` in a comment is a family, not a code, and is not matched.
const CODE_RE = /\bERR_(?:NGROK|BURROW)_[A-Z0-9_]*[A-Z0-9]\b/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Every code written in src/ (outside tests), with the first file that names it. */
function codesInSource(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(SRC)) {
    for (const [code] of readFileSync(file, 'utf8').matchAll(CODE_RE)) {
      if (!found.has(code)) found.set(code, relative(ROOT, file));
    }
  }
  return found;
}

function documented(code: string): boolean {
  return DOC.includes(`\`${code}\``);
}

describe('docs/errors.md', () => {
  it('documents every code used in src/', () => {
    const codes = codesInSource();
    expect(codes.size).toBeGreaterThan(50);
    const missing = [...codes].filter(([code]) => !documented(code)).map(([c, f]) => `${c} (${f})`);
    expect(missing, 'add these codes to docs/errors.md').toEqual([]);
  });

  it('documents every code of the catalogue, muxado codes included', () => {
    const missing = [...Object.values(CODES), ...Object.values(MUX_WIRE_CODES)].filter(
      (code) => !documented(code),
    );
    expect(missing).toEqual([]);
  });

  it('lists no code that nothing emits', () => {
    const codes = codesInSource();
    const stale = [...DOC.matchAll(CODE_RE)].map(([c]) => c).filter((c) => !codes.has(c));
    expect(stale, 'remove these codes from docs/errors.md, or use them').toEqual([]);
  });
});
