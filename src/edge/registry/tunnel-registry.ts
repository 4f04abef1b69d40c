import { CODES, ConflictError } from '../../core/errors.js';
import { longestWildcard } from '../../core/hostname.js';
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { holderOf as describeHolder, type OnlineSession, type OnlineTunnel } from './route.js';

// What a route is lives in route.ts; importers of the registry get it from here too.
export * from './route.js';

/** Streams open now per tunnel (see trackStream): pooled endpoints go to the least busy member. */
const openStreams = new WeakMap<OnlineTunnel, number>();

/**
 * Count `stream` against `tunnel` until it closes; `pick` sends a pool's next connection to the
 * member with the fewest. connectTunnel calls it for every stream it hands out.
 * @example trackStream(tunnel, await tunnel.connect(info));
 */
export function trackStream(tunnel: OnlineTunnel, stream: Duplex): void {
  openStreams.set(tunnel, (openStreams.get(tunnel) ?? 0) + 1);
  stream.once('close', () => openStreams.set(tunnel, (openStreams.get(tunnel) ?? 1) - 1));
}

/**
 * Why a tunnel cannot be added: `holder` serves its name or port already. A 409 with
 * `ERR_NGROK_334`, the code of the bind refusal an agent gets for it (refusals.alreadyOnline).
 */
export class TunnelConflictError extends ConflictError {
  constructor(
    readonly holder: OnlineTunnel,
    message: string,
  ) {
    super(CODES.bindAlreadyOnline, message);
  }
}

/** Where a tunnel is reached, as one string; labeled tunnels have no key (they never conflict). */
function poolKey(tunnel: Pick<OnlineTunnel, 'hostname' | 'port' | 'internal'>): string | undefined {
  if (tunnel.internal !== undefined) return `i:${tunnel.internal}`;
  if (tunnel.hostname !== undefined) return `h:${tunnel.hostname}`;
  if (tunnel.port !== undefined) return `p:${tunnel.port}`;
  return undefined;
}

function wildcardSuffix(hostname: string): string | undefined {
  return hostname.startsWith('*.') ? hostname.slice(1) : undefined;
}

/**
 * The edge's live state: online sessions and tunnels, indexed by hostname, port and labels. One
 * name or port has one live tunnel; a tunnel of the same agent identity (same session, or the
 * session it resumed) takes a name over atomically, so a reconnecting agent keeps its URL with no
 * window where the name is free.
 *
 * Events: 'tunnel-added' (OnlineTunnel), 'tunnel-removed' (OnlineTunnel),
 * 'session-added' / 'session-removed' (OnlineSession).
 *
 * @example
 * registry.addTunnel(tunnel, { takeoverFrom: oldSessionId });
 * registry.byHost('app.burrow.localhost')?.connect(info);
 */
export class TunnelRegistry extends EventEmitter {
  private readonly sessions = new Map<string, OnlineSession>();
  private readonly tunnels = new Map<string, OnlineTunnel>();
  private readonly hosts = new Map<string, OnlineTunnel>();
  /** Wildcard tunnels by suffix (`.x.example.com`). */
  private readonly wildcards = new Map<string, OnlineTunnel>();
  private readonly ports = new Map<number, OnlineTunnel>();
  private readonly labeled = new Set<OnlineTunnel>();
  /** Internal endpoints by key (`api.internal`, `db.internal:5432`). */
  private readonly internals = new Map<string, OnlineTunnel>();
  /** Every member of a pooled name or port by its key; the maps above hold the first member. */
  private readonly pools = new Map<string, { members: OnlineTunnel[]; next: number }>();

  addSession(session: OnlineSession): void {
    this.sessions.set(session.id, session);
    this.emit('session-added', session);
  }

  /** Forget a session and every tunnel it still holds. */
  removeSession(sessionId: string): void {
    const session = this.sessions.get(sessionId);
    for (const tunnel of [...this.tunnels.values()]) {
      if (tunnel.sessionId === sessionId) this.removeTunnel(tunnel.id);
    }
    if (session) {
      this.sessions.delete(sessionId);
      this.emit('session-removed', session);
    }
  }

  session(id: string): OnlineSession | undefined {
    return this.sessions.get(id);
  }

  listSessions(): OnlineSession[] {
    return [...this.sessions.values()];
  }

  /** Sessions online, or only those of `credentialId`; counted without copying the list. */
  sessionCount(credentialId?: string): number {
    if (credentialId === undefined) return this.sessions.size;
    let n = 0;
    for (const s of this.sessions.values()) if (s.credentialId === credentialId) n++;
    return n;
  }

  /**
   * Add a tunnel. If its name or port is held by a tunnel of `takeoverFrom` (the stale session this
   * agent resumed) or of its own session with the same bind id, that tunnel is replaced in one step;
   * held by anyone else, TunnelConflictError.
   */
  addTunnel(
    tunnel: OnlineTunnel,
    options: { takeoverFrom?: string | undefined } = {},
  ): OnlineTunnel | undefined {
    const holder = this.holderOf(tunnel);
    let replaced: OnlineTunnel | undefined;
    if (holder) {
      const members = this.pools.get(poolKey(tunnel) ?? '')?.members ?? [holder];
      const mine = members.find(
        (m) =>
          m.sessionId === options.takeoverFrom ||
          (m.sessionId === tunnel.sessionId && m.bindId === tunnel.bindId),
      );
      // Pooling joins only when every member pools too: one that did not asked to be alone.
      const joins = tunnel.pooling === true && members.every((m) => m.pooling === true);
      if (!mine && !joins) {
        const where = tunnel.internal ?? tunnel.hostname ?? `port ${tunnel.port}`;
        throw new TunnelConflictError(
          holder,
          `${where} is already served by another route (${holder.id} of ${describeHolder(holder)})`,
        );
      }
      if (mine) {
        this.removeTunnel(mine.id);
        replaced = mine;
      }
    }
    this.tunnels.set(tunnel.id, tunnel);
    const key = poolKey(tunnel);
    if (key !== undefined) {
      const pool = this.pools.get(key) ?? { members: [], next: 0 };
      pool.members.push(tunnel);
      this.pools.set(key, pool);
    }
    if (tunnel.internal !== undefined) {
      if (!this.internals.has(tunnel.internal)) this.internals.set(tunnel.internal, tunnel);
    } else if (tunnel.hostname !== undefined) {
      const suffix = wildcardSuffix(tunnel.hostname);
      const map = suffix ? this.wildcards : this.hosts;
      const at: string = suffix ?? tunnel.hostname;
      if (!map.has(at)) map.set(at, tunnel);
    } else if (tunnel.port !== undefined) {
      if (!this.ports.has(tunnel.port)) this.ports.set(tunnel.port, tunnel);
    } else {
      this.labeled.add(tunnel);
    }
    this.emit('tunnel-added', tunnel);
    return replaced;
  }

  removeTunnel(id: string): OnlineTunnel | undefined {
    const tunnel = this.tunnels.get(id);
    if (!tunnel) return undefined;
    this.tunnels.delete(id);
    const key = poolKey(tunnel);
    let successor: OnlineTunnel | undefined;
    if (key !== undefined) {
      const pool = this.pools.get(key);
      if (pool) {
        pool.members = pool.members.filter((m) => m !== tunnel);
        if (pool.members.length === 0) this.pools.delete(key);
        successor = pool.members[0];
      }
    }
    const unset = <K>(map: Map<K, OnlineTunnel>, at: K): void => {
      if (map.get(at) !== tunnel) return;
      if (successor) map.set(at, successor);
      else map.delete(at);
    };
    if (tunnel.internal !== undefined) {
      unset(this.internals, tunnel.internal);
    } else if (tunnel.hostname !== undefined) {
      const suffix = wildcardSuffix(tunnel.hostname);
      if (suffix) unset(this.wildcards, suffix);
      else unset(this.hosts, tunnel.hostname);
    } else if (tunnel.port !== undefined) {
      unset(this.ports, tunnel.port);
    } else {
      this.labeled.delete(tunnel);
    }
    this.emit('tunnel-removed', tunnel);
    return tunnel;
  }

  /**
   * The member of `tunnel`'s pool that serves the next request or connection: the one with the
   * fewest open streams, round robin among equals; the tunnel itself when it does not pool. A
   * removed member is out of the pool at once.
   * @example const target = registry.pick(registry.byHost(host)!);
   */
  pick(tunnel: OnlineTunnel): OnlineTunnel {
    // Only pooling tunnels share (every member of a pool pools): the rest need no lookup, and
    // this runs for every request.
    if (tunnel.pooling !== true) return tunnel;
    const key = poolKey(tunnel);
    const pool = key === undefined ? undefined : this.pools.get(key);
    if (!pool || pool.members.length < 2) return tunnel;
    // Least connections; among equals, the next one after the last pick (round robin).
    const n = pool.members.length;
    let best = (pool.next + 1) % n;
    let least = Infinity;
    for (let step = 1; step <= n; step++) {
      const at = (pool.next + step) % n;
      const load = openStreams.get(pool.members[at]!) ?? 0;
      if (load < least) {
        least = load;
        best = at;
      }
    }
    pool.next = best;
    return pool.members[best]!;
  }

  /** Every online member of the pool that `tunnel` belongs to (itself alone without pooling). */
  poolOf(tunnel: OnlineTunnel): readonly OnlineTunnel[] {
    const key = poolKey(tunnel);
    return (key === undefined ? undefined : this.pools.get(key)?.members) ?? [tunnel];
  }

  /**
   * The internal endpoint at `key` (`api.internal`, `db.internal:5432`), pooled members round
   * robin; public listeners never call this.
   * @example registry.internal('api.internal')
   */
  internal(key: string): OnlineTunnel | undefined {
    const head = this.internals.get(key);
    return head && this.pick(head);
  }

  tunnel(id: string): OnlineTunnel | undefined {
    return this.tunnels.get(id);
  }

  listTunnels(): OnlineTunnel[] {
    return [...this.tunnels.values()];
  }

  /** The tunnel serving `hostname`: an exact name first, then the longest matching wildcard. */
  byHost(hostname: string): OnlineTunnel | undefined {
    return this.hosts.get(hostname) ?? longestWildcard(hostname, this.wildcards);
  }

  byPort(port: number): OnlineTunnel | undefined {
    return this.ports.get(port);
  }

  /**
   * The tunnel holding exactly this name (a wildcard only as itself) or port, without the
   * wildcard fallback of byHost: what addTunnel would conflict with.
   */
  holder(where: {
    hostname?: string | undefined;
    port?: number | undefined;
    internal?: string | undefined;
  }): OnlineTunnel | undefined {
    return this.holderOf(where);
  }

  /** Labeled tunnels whose labels are a superset of `selector`. */
  matchingLabels(selector: Record<string, string>): OnlineTunnel[] {
    const wanted = Object.entries(selector);
    return [...this.labeled].filter((t) => wanted.every(([k, v]) => t.labels?.[k] === v));
  }

  private holderOf(
    tunnel: Pick<OnlineTunnel, 'hostname' | 'port' | 'internal'>,
  ): OnlineTunnel | undefined {
    if (tunnel.internal !== undefined) return this.internals.get(tunnel.internal);
    if (tunnel.hostname !== undefined) {
      const suffix = wildcardSuffix(tunnel.hostname);
      return suffix ? this.wildcards.get(suffix) : this.hosts.get(tunnel.hostname);
    }
    if (tunnel.port !== undefined) return this.ports.get(tunnel.port);
    return undefined;
  }
}
