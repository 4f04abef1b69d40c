/** Small helpers for the benchmark's figures and tables. */
import { cpus } from 'node:os';

/**
 * The `p`-th percentile (0-100) of `sorted` (ascending), nearest-rank.
 * @example percentile([1, 2, 3, 4], 50) // 2
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** A number with `digits` decimals and thousands separators. */
export function fmt(value: number, digits = 0): string {
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/**
 * A Markdown table, columns padded so it also reads well in a terminal.
 * @example markdownTable(['a', 'b'], [['1', '2']])
 */
export function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  // Cells are padded by one space each side; the rule matches that width, `:` marks right-aligned.
  const rule = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/**
 * The machine a run was measured on: Node version and CPUs.
 * @example console.log(`Ingress throughput, ${machine()}`)
 */
export function machine(): string {
  const cpu = cpus();
  return `Node ${process.version}, ${cpu.length} x ${cpu[0]?.model ?? 'cpu'}`;
}

/** Bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return `${fmt(bytes / 2 ** 20, 1)} MiB`;
}

/**
 * A memory table row: RSS, V8 heap used, external + array buffers.
 * @example memoryRow('before', await edge.gcMemory())
 */
export function memoryRow(
  label: string,
  memory: { rss: number; heapUsed: number; external: number },
): string[] {
  return [label, mib(memory.rss), mib(memory.heapUsed), mib(memory.external)];
}
