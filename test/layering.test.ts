import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * decisions.md, "Shape of the code": a layer imports only from the layers listed before it.
 * Tests and src/test-support may import anything; nothing else may import test-support.
 */
const LAYERS = ['core', 'store', 'policy', 'protocol', 'edge', 'sdk', 'api', 'agent', 'cli'];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'test-support' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Every relative module a file names: static imports, re-exports and dynamic `import()`. */
function relativeImports(text: string): string[] {
  const specifiers: string[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;
  for (const match of text.matchAll(pattern)) specifiers.push(match[1]!);
  return specifiers;
}

/** The top folder under src/ a path sits in ('' for a file directly in src/). */
function layerOf(path: string): string {
  const parts = relative(SRC, path).split(/[\\/]/);
  return parts.length > 1 ? parts[0]! : '';
}

/** Why `from` may not import `to`, or undefined when it may. */
function violation(fromLayer: string, toLayer: string): string | undefined {
  if (fromLayer === toLayer) return undefined;
  if (toLayer === 'test-support') return `${fromLayer} imports test-support, which only tests may`;
  const from = LAYERS.indexOf(fromLayer);
  const to = LAYERS.indexOf(toLayer);
  if (from < 0) return `${fromLayer || 'src/'} is not a layer`;
  if (to < 0) return `${toLayer || 'src/'} is not a layer`;
  if (to > from) return `${fromLayer} must not import ${toLayer} (${toLayer} comes after it)`;
  return undefined;
}

function violations(): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    for (const specifier of relativeImports(readFileSync(file, 'utf8'))) {
      const target = resolve(dirname(file), specifier);
      if (!target.startsWith(SRC)) continue;
      const why = violation(layerOf(file), layerOf(target));
      if (why) found.push(`${relative(ROOT, file)} → ${relative(ROOT, target)}: ${why}`);
    }
  }
  return found;
}

describe('layering', () => {
  it('finds imports of every form and judges them by the layer order', () => {
    expect(
      relativeImports(
        "import a from './a.js';\nimport type { B } from '../store/b.js';\nexport * from './c.js';\nconst d = await import('../policy/d.js');\nimport 'node:fs';",
      ),
    ).toEqual(['./a.js', '../store/b.js', './c.js', '../policy/d.js']);
    expect(violation('store', 'policy')).toMatch(/store must not import policy/);
    expect(violation('api', 'test-support')).toMatch(/test-support/);
    expect(violation('policy', 'store')).toBeUndefined();
    expect(violation('cli', 'core')).toBeUndefined();
  });

  it('src/ imports only from earlier layers', () => {
    expect(sourceFiles(SRC).length).toBeGreaterThan(100);
    expect(violations()).toEqual([]);
  });
});
