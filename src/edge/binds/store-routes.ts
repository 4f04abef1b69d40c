/**
 * What the route sources that come from the store (cloud endpoints, edges) share: following the
 * store, at once on this process's writes (the repository's `changes`) and on a timer for writes
 * made by other processes or to what the routes read (IP policy rules, backends, CAs).
 */
import type { EventEmitter } from 'node:events';
import { coalesced } from '../../core/coalesced.js';

/** How often routes are reloaded from the store when nothing told this process about a change. */
export const STORE_ROUTES_SYNC_MS = 2000;

/**
 * Runs `reload` at start, on every 'change' of `changes` and every `everyMs`; calls that arrive
 * during a reload share one follow-up reload, so a burst of writes costs two reloads at most.
 * @example
 * const follower = new StoreFollower(repos.edges.changes, () => this.reload());
 * await follower.start(); ... follower.stop();
 */
export class StoreFollower {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /** Reload now; resolves once a reload that started after the call has finished. */
  readonly sync: () => Promise<void>;

  constructor(
    private readonly changes: EventEmitter,
    reload: () => Promise<void>,
    private readonly everyMs = STORE_ROUTES_SYNC_MS,
  ) {
    this.sync = coalesced(reload, { stop: () => this.stopped });
  }

  async start(): Promise<void> {
    this.changes.on('change', this.onChange);
    await this.sync();
    this.timer = setInterval(() => void this.sync(), this.everyMs);
    this.timer.unref();
  }

  /** Stop following; a reload under way finishes and no follow-up runs. */
  stop(): void {
    this.stopped = true;
    this.changes.off('change', this.onChange);
    clearInterval(this.timer);
  }

  private readonly onChange = (): void => {
    void this.sync();
  };
}

/**
 * A source of routes kept from the store (cloud endpoints, edges): it follows the store from
 * start() (StoreFollower) and takes its routes out of the registry on close().
 * @example class EdgeRoutes extends StoreRouteSource { protected async reload() {…} protected removeAll() {…} }
 */
export abstract class StoreRouteSource {
  /** Set by close(): a reload still under way must not put routes back. */
  protected closed = false;
  private readonly follower: StoreFollower;

  constructor(changes: EventEmitter, everyMs?: number) {
    this.follower = new StoreFollower(changes, () => this.reload(), everyMs);
  }

  /** Load every route and follow changes from here on. */
  start(): Promise<void> {
    return this.follower.start();
  }

  /** Reload now; calls during a reload share one follow-up reload. */
  sync(): Promise<void> {
    return this.follower.sync();
  }

  /** Stop following the store and take every route of this source out of the registry. */
  close(): void {
    this.closed = true;
    this.follower.stop();
    this.removeAll();
  }

  /** One reload from the store; must not reject (log and keep the last good state). */
  protected abstract reload(): Promise<void>;

  protected abstract removeAll(): void;
}
