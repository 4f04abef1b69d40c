/**
 * What the route sources that come from the store (cloud endpoints, edges) share: following the
 * store by change events, not by polling. A write through this process's API is announced by the
 * repository's `changes` ('change' with the id); another node's reaches the cluster node as a
 * PostgreSQL notice naming the id (edge.ts hands it to `syncIds`). Each reloads only what it
 * names. A full reload runs at start, after a notice without ids (a reconnect, a change to
 * something many edges read) and, as a safety net for a lost notice, every `everyMs`
 * (`--store-reconcile-ms`, minutes by default); nothing runs while nothing changes.
 */
import type { EventEmitter } from 'node:events';
import { coalesced } from '../../core/coalesced.js';
import type { TunnelRegistry } from '../registry/tunnel-registry.js';

/** The full reconcile's default period: a safety net for lost notices, not the way changes arrive. */
export const STORE_RECONCILE_MS = 300_000;

/**
 * More ids than this in one round are read with one full reload instead: one query for all beats
 * hundreds of reads by id (a backend that thousands of edges use changed).
 */
export const MOST_IDS_PER_ROUND = 100;

/**
 * Runs `reloadAll` at start and `reloadIds` on every 'change' of `changes`, one reload at a time so
 * an older read never overwrites a newer one (`coalesced`). Requests that arrive during a reload
 * wait for the next round, which takes them all at once (ids merged; a full reload covers every
 * id), so a burst of writes costs two rounds at most.
 * @example
 * const follower = new StoreFollower(repos.edges.changes, () => this.reload(), (ids) => this.reloadIds(ids));
 * await follower.start(); ... follower.stop();
 */
export class StoreFollower {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private fullPending = false;
  private readonly idsPending = new Set<string>();
  /** Runs rounds until nothing is pending; every caller waits for the round after its call. */
  private readonly rounds: () => Promise<void>;

  constructor(
    private readonly changes: EventEmitter,
    reloadAll: () => Promise<void>,
    reloadIds: (ids: string[]) => Promise<void>,
    private readonly everyMs = STORE_RECONCILE_MS,
  ) {
    this.rounds = coalesced(
      async () => {
        const full = this.fullPending;
        const ids = [...this.idsPending];
        this.fullPending = false;
        this.idsPending.clear();
        try {
          if (full || ids.length > MOST_IDS_PER_ROUND) await reloadAll();
          else await reloadIds(ids);
        } catch {
          // Reloads log their own failures and keep the last good state; the next event or
          // reconcile tries again.
        }
      },
      { stop: () => this.stopped },
    );
  }

  async start(): Promise<void> {
    this.changes.on('change', this.onChange);
    await this.sync();
    if (this.everyMs > 0) {
      this.timer = setInterval(() => void this.sync(), this.everyMs);
      this.timer.unref();
    }
  }

  /** Reload everything; resolves once a full reload that started after the call has finished. */
  sync(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.fullPending = true;
    return this.rounds();
  }

  /** Reload these ids only; resolves once a round that started after the call has finished. */
  syncIds(ids: readonly string[]): Promise<void> {
    if (this.stopped || ids.length === 0) return Promise.resolve();
    for (const id of ids) this.idsPending.add(id);
    return this.rounds();
  }

  /** Stop following; a reload under way finishes and no further round runs. */
  stop(): void {
    this.stopped = true;
    this.changes.off('change', this.onChange);
    clearInterval(this.timer);
  }

  private readonly onChange = (id: unknown): void => {
    if (typeof id === 'string') void this.syncIds([id]);
    else void this.sync();
  };
}

/**
 * A source of routes kept from the store (cloud endpoints, edges): it follows the store from
 * start() (StoreFollower) and takes its routes out of the registry on close(). A route whose name,
 * port or URL an agent's tunnel holds waits in `blocked` (the subclass warns once) and is tried
 * again (`retry`) when a tunnel leaves the registry: no reload is needed, the route is at hand.
 * @example class EdgeRoutes extends StoreRouteSource<EdgeRoute> { protected async reload() {…} protected async reloadIds(ids) {…} protected retry(route) {…} protected removeAll() {…} }
 */
export abstract class StoreRouteSource<Blocked> {
  /** Set by close(): a reload still under way must not put routes back. */
  protected closed = false;
  /** Routes an agent's tunnel blocks, by id: what `retry` is given when a tunnel leaves. */
  protected readonly blocked = new Map<string, Blocked>();
  /** A retry of the blocked routes is queued. */
  private retrying = false;
  private readonly follower: StoreFollower;

  constructor(
    changes: EventEmitter,
    private readonly registry: TunnelRegistry,
    everyMs?: number,
  ) {
    this.follower = new StoreFollower(
      changes,
      () => this.reload(),
      (ids) => this.reloadIds(ids),
      everyMs,
    );
    registry.on('tunnel-removed', this.retryBlocked);
  }

  /** Load every route and follow changes from here on. */
  start(): Promise<void> {
    return this.follower.start();
  }

  /** Reload everything now; calls during a reload share one follow-up round. */
  sync(): Promise<void> {
    return this.follower.sync();
  }

  /** Reload the routes of these ids (a change event named them); the others are not read. */
  syncIds(ids: readonly string[]): Promise<void> {
    return this.follower.syncIds(ids);
  }

  /** Stop following the store and take every route of this source out of the registry. */
  close(): void {
    this.closed = true;
    this.registry.off('tunnel-removed', this.retryBlocked);
    this.follower.stop();
    this.removeAll();
  }

  /**
   * Try the blocked routes again (a tunnel left: what it held may be free now). Queued after the
   * registry's listeners have seen the removal, so the ingress does not see a route added before
   * the old one removed.
   */
  protected readonly retryBlocked = (): void => {
    if (this.blocked.size === 0 || this.closed || this.retrying) return;
    this.retrying = true;
    queueMicrotask(() => {
      this.retrying = false;
      if (this.closed) return;
      for (const route of [...this.blocked.values()]) this.retry(route);
    });
  };

  /** One full reload from the store; must not reject (log and keep the last good state). */
  protected abstract reload(): Promise<void>;

  /** Reload only `ids` (created, changed or deleted); must not reject. */
  protected abstract reloadIds(ids: string[]): Promise<void>;

  /** Install a blocked route again (it stays in `blocked` while still held). */
  protected abstract retry(route: Blocked): void;

  protected abstract removeAll(): void;
}
