import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The shape of the code: src/ is split into layers, one top folder each, and a layer imports only
 * from itself and the layers listed before it (core is imported by everything, cli by nothing).
 * A file's layer is the top folder under src/ it sits in, however deep: src/edge/ingress/http/x.ts
 * is in `edge`. Production code (every file under src/ that is not a `*.test.ts`) never imports
 * from test/: test helpers live in test/support/, and only tests (the `*.test.ts` files under src/,
 * test/ and bench/) may import them. tsconfig.build.json compiles src/ alone, so such an import
 * would not build either.
 */
const LAYERS = ['core', 'store', 'policy', 'protocol', 'edge', 'sdk', 'api', 'agent', 'cli'];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');
const TEST = join(ROOT, 'test');

/** Every production file under src/, in nested folders too (tests excluded). */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
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

/** Whether `path` is `dir` or inside it. */
function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir + sep);
}

/** The top folder under src/ a path sits in, at any depth ('' for a file directly in src/). */
function layerOf(path: string): string {
  const parts = relative(SRC, path).split(/[\\/]/);
  return parts.length > 1 ? parts[0]! : '';
}

/** Why `from` may not import `to`, or undefined when it may. */
function violation(fromLayer: string, toLayer: string): string | undefined {
  if (fromLayer === toLayer) return undefined;
  const from = LAYERS.indexOf(fromLayer);
  const to = LAYERS.indexOf(toLayer);
  if (from < 0) return `${fromLayer || 'src/'} is not a layer`;
  if (to < 0) return `${toLayer || 'src/'} is not a layer`;
  if (to > from) return `${fromLayer} must not import ${toLayer} (${toLayer} comes after it)`;
  return undefined;
}

/** Why production file `file` may not import `target` (absolute paths), or undefined. */
function importViolation(file: string, target: string): string | undefined {
  if (isInside(target, TEST)) return 'production code must not import from test/';
  if (!isInside(target, SRC)) return undefined;
  return violation(layerOf(file), layerOf(target));
}

function violations(): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    for (const specifier of relativeImports(readFileSync(file, 'utf8'))) {
      const target = resolve(dirname(file), specifier);
      const why = importViolation(file, target);
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
    expect(violation('policy', 'store')).toBeUndefined();
    expect(violation('cli', 'core')).toBeUndefined();
    expect(violation('test-support', 'core')).toMatch(/not a layer/);
  });

  it('takes the layer from the top folder under src/, however deep the file is', () => {
    expect(layerOf(join(SRC, 'edge', 'ingress.ts'))).toBe('edge');
    expect(layerOf(join(SRC, 'edge', 'ingress', 'http', 'server.ts'))).toBe('edge');
    expect(layerOf(join(SRC, 'index.ts'))).toBe('');
    const nested = join(SRC, 'edge', 'ingress', 'http', 'server.ts');
    expect(importViolation(nested, join(SRC, 'edge', 'tunnel-registry.ts'))).toBeUndefined();
    expect(importViolation(nested, join(SRC, 'protocol', 'index.ts'))).toBeUndefined();
    expect(importViolation(nested, join(SRC, 'api', 'app.ts'))).toMatch(/edge must not import api/);
  });

  it('rejects any import of test/ from production code', () => {
    expect(importViolation(join(SRC, 'api', 'app.ts'), join(TEST, 'support', 'api.ts'))).toMatch(
      /must not import from test\//,
    );
    expect(importViolation(join(SRC, 'core', 'ids.ts'), join(ROOT, 'node_modules', 'x.js'))).toBe(
      undefined,
    );
  });

  it('src/ imports only from earlier layers, and never from test/', () => {
    const files = sourceFiles(SRC);
    expect(files.length).toBeGreaterThan(100);
    expect(
      files.filter((file) => !LAYERS.includes(layerOf(file))).map((f) => relative(ROOT, f)),
    ).toEqual([]);
    expect(violations()).toEqual([]);
  });

  it('each layer folder has a README.md that says what it is and what it may import', () => {
    for (const layer of LAYERS) {
      expect(readFileSync(join(SRC, layer, 'README.md'), 'utf8')).toMatch(/^# /);
    }
  });
});

/**
 * Inside the edge the same rule holds between its folders (each folder's README.md says what it
 * is): registry < metrics < listeners < certificates < binds < sessions < ssh < cluster < ingress <
 * events, and
 * edge.ts, which composes them, on top. ingress/http is part of ingress.
 */
const EDGE_FOLDERS = [
  'registry',
  'metrics',
  'listeners',
  'certificates',
  'binds',
  'sessions',
  'ssh',
  'cluster',
  'ingress',
  'events',
  '',
];
const EDGE = join(SRC, 'edge');

/** The same inside the protocol: muxado knows nothing of tunnels; index.ts exports both. */
const PROTOCOL_FOLDERS = ['muxado', 'tunnel', ''];
const PROTOCOL = join(SRC, 'protocol');

/** The folder of a path under `root` ('' for a file directly in it). */
function folderOf(root: string, path: string): string {
  const parts = relative(root, path).split(sep);
  return parts.length > 1 ? parts[0]! : '';
}

/** Imports between the folders of `root` that go against `order`. */
function folderViolations(root: string, order: string[]): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(root)) {
    const from = order.indexOf(folderOf(root, file));
    for (const specifier of relativeImports(readFileSync(file, 'utf8'))) {
      const target = resolve(dirname(file), specifier);
      if (!isInside(target, root)) continue;
      const to = order.indexOf(folderOf(root, target));
      if (from < 0 || to < 0 || to > from) {
        found.push(`${relative(ROOT, file)} → ${relative(ROOT, target)}`);
      }
    }
  }
  return found;
}

describe.each([
  ['edge', EDGE, EDGE_FOLDERS],
  ['protocol', PROTOCOL, PROTOCOL_FOLDERS],
])('%s folders', (_name, root, order) => {
  it('import only from earlier folders', () => {
    expect(folderViolations(root, order)).toEqual([]);
  });

  it('each folder has a README.md that says what it is', () => {
    for (const folder of order.filter((f) => f !== '')) {
      expect(readFileSync(join(root, folder, 'README.md'), 'utf8')).toMatch(/^# /);
    }
  });
});
