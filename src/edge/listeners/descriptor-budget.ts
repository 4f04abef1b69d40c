/**
 * The connection caps of every listener, fitted to the process's open-files limit. Each accepted
 * connection holds one file descriptor; when the process runs out, accept() fails for every
 * listener at once, agents included. So the caps of the API, the agent listener and the public
 * ingress are shares of what the limit leaves after a reserve for the process itself, and add up
 * to no more than that: a flood that fills the API's or the ingress's share leaves the agents'
 * share free.
 */
import { readFileSync } from 'node:fs';
import type { ServerLimits } from '../../core/limits.js';

/**
 * The soft "Max open files" of `/proc/self/limits` (Linux); undefined when unlimited or
 * unreadable (other systems: the configured caps apply as they are).
 * @example openFilesLimit('Max open files            1024                 4096                 files\n') // 1024
 */
export function openFilesLimit(procLimits?: string): number | undefined {
  let text = procLimits;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
}

/**
 * Descriptors kept for the process itself, never given to a listener's cap: Node and its stdio,
 * the database (SQLite's three files or a PostgreSQL pool), the listening sockets (one per TCP
 * endpoint port among them), node links, DNS, outbound fetches. An eighth of the limit, at least 64.
 */
export function processReserve(openFiles: number): number {
  return Math.max(64, Math.floor(openFiles / 8));
}

/**
 * How what is left after the reserve is shared: the agents' share is theirs whatever the API and
 * the ingress hold; the ingress, where visitors' connections arrive, gets the most.
 */
const SHARES = { agent: 2, api: 1, ingress: 5 } as const;

/** Which listeners a process runs (`--role`). */
export type ListenerRole = 'all' | 'api' | 'edge';

/** Caps as configured and as fitted: the lowered ones are listed, for the startup log. */
export interface FittedLimits {
  limits: ServerLimits;
  /** The open-files limit read, if any. */
  openFiles: number | undefined;
  /** `field: configured → fitted` for each cap the limit lowered. */
  lowered: string[];
}

type CapFields = {
  total: 'apiMaxConnections' | 'agentMaxConnections' | 'ingressMaxConnections';
  perIp: 'apiMaxConnectionsPerIp' | 'agentMaxConnectionsPerIp' | 'ingressMaxConnectionsPerIp';
};

const CAPS: Record<keyof typeof SHARES, CapFields> = {
  agent: { total: 'agentMaxConnections', perIp: 'agentMaxConnectionsPerIp' },
  api: { total: 'apiMaxConnections', perIp: 'apiMaxConnectionsPerIp' },
  ingress: { total: 'ingressMaxConnections', perIp: 'ingressMaxConnectionsPerIp' },
};

/**
 * `limits` with each running listener's total cap no higher than its share of `openFiles` (less
 * the process reserve), and its per-address cap no higher than half that share. A listener
 * configured below its share keeps its cap and leaves the rest to the others, by their weights
 * (a node given to agents with `--ingress-max-connections 1000` lets agents have what the ingress
 * does not take): caps are lowered only when together they do not fit. Without a known limit,
 * the limits as they are.
 * @example fitToOpenFiles(DEFAULT_LIMITS, 'all', 1024).limits.ingressMaxConnections // 560
 */
export function fitToOpenFiles(
  limits: ServerLimits,
  role: ListenerRole,
  openFiles: number | undefined,
): FittedLimits {
  const fitted = { ...limits };
  const lowered: string[] = [];
  if (openFiles === undefined) return { limits: fitted, openFiles, lowered };
  const running = (Object.keys(SHARES) as (keyof typeof SHARES)[]).filter((listener) =>
    listener === 'api' ? role !== 'edge' : role !== 'api',
  );
  for (const [listener, share] of shares(running, limits, openFiles)) {
    const { total, perIp } = CAPS[listener];
    for (const [field, cap] of [
      [total, share],
      // One address never takes a listener's whole share: others still get in during its flood.
      [perIp, Math.min(fitted[total], Math.max(1, Math.floor(share / 2)))],
    ] as const) {
      if (fitted[field] > cap) {
        lowered.push(`${field}: ${fitted[field]} → ${cap}`);
        fitted[field] = cap;
      }
    }
  }
  return { limits: fitted, openFiles, lowered };
}

/**
 * Each running listener's share of what the reserve leaves: by weight, except that a listener
 * whose configured cap is below its share is given just that, and what it leaves is shared again
 * among the others (until none is below its share).
 */
function shares(
  running: (keyof typeof SHARES)[],
  limits: ServerLimits,
  openFiles: number,
): Map<keyof typeof SHARES, number> {
  const result = new Map<keyof typeof SHARES, number>();
  let left = Math.max(0, openFiles - processReserve(openFiles));
  let pool = running;
  for (;;) {
    const weights = pool.reduce((sum, listener) => sum + SHARES[listener], 0);
    // At least one connection each: a listener with none would refuse everyone for ever.
    const share = (listener: keyof typeof SHARES): number =>
      Math.max(1, Math.floor((left * SHARES[listener]) / weights));
    const below = pool.filter((listener) => limits[CAPS[listener].total] <= share(listener));
    if (below.length === 0 || below.length === pool.length) {
      for (const listener of pool) result.set(listener, share(listener));
      return result;
    }
    for (const listener of below) {
      // Its per-address cap stays fitted to the share it had in this round, as before.
      result.set(listener, share(listener));
      left -= limits[CAPS[listener].total];
    }
    pool = pool.filter((listener) => !below.includes(listener));
  }
}
