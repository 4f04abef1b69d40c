/**
 * A reading of a V8 `.cpuprofile` (from `node --cpu-prof`): self time by function and by area
 * (our muxado, our edge, Node's HTTP, streams, TLS, sockets, native calls, GC), as shares of the
 * time the process was busy.
 *
 *   node --import tsx bench/cpu-profile.ts /tmp/burrow-edge-123.cpuprofile [top]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { markdownTable } from './report.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame's code lives, coarsely: what a reader of the profile wants to add up. */
function areaOf(functionName: string, url: string): string {
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8/Node runtime (program)';
  if (url.includes('/dist/protocol/') || url.includes('/src/protocol/')) return 'muxado (ours)';
  if (url.includes('/dist/edge/') || url.includes('/src/edge/')) return 'edge (ours)';
  if (url.includes('/dist/') || url.includes('/src/')) return 'other Burrow code';
  if (url.includes('node_modules')) return 'npm packages';
  if (/node:(_http|internal\/http)/.test(url)) return 'Node HTTP (parser glue, client, server)';
  if (/node:(_tls|internal\/tls|tls)/.test(url)) return 'Node TLS (JS side)';
  if (/node:internal\/streams|node:stream/.test(url)) return 'Node streams';
  if (/node:(net|internal\/stream_base_commons|internal\/net)/.test(url)) return 'Node sockets';
  if (url.startsWith('node:')) return 'Node other';
  if (url === '') return 'native (syscalls, crypto, HTTP parser)';
  return 'other';
}

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  byArea: { area: string; ms: number; share: number }[];
  topFrames: { frame: string; area: string; ms: number; share: number }[];
}

/**
 * Self time of every frame of `path`, by area and the `top` heaviest frames.
 * @example console.log(formatSummary(summarizeProfile('edge.cpuprofile')));
 */
export function summarizeProfile(path: string, top = 20): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const frames = new Map<string, { area: string; us: number }>();
  const areas = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const area = areaOf(functionName, url);
    if (area === 'idle') {
      idle += us;
      continue;
    }
    busy += us;
    const file = url.replace(/^.*\/(dist|src|node_modules)\//, '$1/').replace(/^file:\/\//, '');
    const key = `${functionName || '(anonymous)'} ${file ? `${file}:${lineNumber + 1}` : ''}`;
    const frame = frames.get(key) ?? { area, us: 0 };
    frame.us += us;
    frames.set(key, frame);
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const share = (us: number) => (busy === 0 ? 0 : us / busy);
  return {
    busyMs: busy / 1000,
    idleMs: idle / 1000,
    byArea: [...areas]
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, ms: us / 1000, share: share(us) })),
    topFrames: [...frames]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, top)
      .map(([frame, f]) => ({
        frame: frame.trim(),
        area: f.area,
        ms: f.us / 1000,
        share: share(f.us),
      })),
  };
}

/** The summary as two Markdown tables. */
export function formatSummary(summary: ProfileSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  const busyShare = summary.busyMs / (summary.busyMs + summary.idleMs);
  return [
    `busy ${summary.busyMs.toFixed(0)} ms, idle ${summary.idleMs.toFixed(0)} ms (busy ${pct(busyShare)})`,
    '',
    markdownTable(
      ['area (self time)', 'share of busy'],
      summary.byArea.map((a) => [a.area, pct(a.share)]),
    ),
    '',
    markdownTable(
      ['frame (self time)', 'area', 'share of busy'],
      summary.topFrames.map((f) => [f.frame, f.area, pct(f.share)]),
    ),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = process.argv[2];
  if (!path) {
    console.error('usage: node --import tsx bench/cpu-profile.ts <file.cpuprofile> [top]');
    process.exit(2);
  }
  console.log(formatSummary(summarizeProfile(path, Number(process.argv[3] ?? 20))));
}
