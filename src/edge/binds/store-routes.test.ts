import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { until } from '../../../test/support/mux.js';
import { MOST_IDS_PER_ROUND, StoreFollower } from './store-routes.js';

/** A follower whose reloads are recorded, and can be held open to see what queues behind them. */
function recorded(everyMs = 0) {
  const changes = new EventEmitter();
  const rounds: (string[] | 'all')[] = [];
  let release: (() => void) | undefined;
  let hold = false;
  const reload = async (round: string[] | 'all'): Promise<void> => {
    rounds.push(round);
    if (hold) await new Promise<void>((resolve) => (release = resolve));
  };
  const follower = new StoreFollower(
    changes,
    () => reload('all'),
    (ids) => reload(ids),
    everyMs,
  );
  return {
    changes,
    rounds,
    follower,
    holdNext: () => (hold = true),
    release: () => {
      hold = false;
      release?.();
    },
  };
}

describe('StoreFollower: reloads by change events', () => {
  it('loads everything at start, then reads only the ids an event names', async () => {
    const f = recorded();
    await f.follower.start();
    f.changes.emit('change', 'edg_1');
    await f.follower.syncIds([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(f.rounds).toEqual(['all', ['edg_1']]);
    f.follower.stop();
  });

  it('runs one round at a time; what arrives meanwhile is merged into the next round', async () => {
    const f = recorded();
    await f.follower.start();
    f.holdNext();
    const first = f.follower.syncIds(['a']);
    const second = f.follower.syncIds(['b']);
    const third = f.follower.syncIds(['c', 'b']);
    f.release();
    await Promise.all([first, second, third]);
    expect(f.rounds).toEqual(['all', ['a'], ['b', 'c']]);

    // A full reload covers the ids queued with it.
    f.holdNext();
    const held = f.follower.syncIds(['d']);
    const ids = f.follower.syncIds(['e']);
    const full = f.follower.sync();
    f.release();
    await Promise.all([held, ids, full]);
    expect(f.rounds.slice(3)).toEqual([['d'], 'all']);
    f.follower.stop();
  });

  it('reads many ids with one full reload', async () => {
    const f = recorded();
    await f.follower.start();
    const many = Array.from({ length: MOST_IDS_PER_ROUND + 1 }, (_, i) => `edg_${i}`);
    await f.follower.syncIds(many);
    await f.follower.syncIds(many.slice(0, MOST_IDS_PER_ROUND));
    expect(f.rounds.map((r) => (r === 'all' ? r : r.length))).toEqual([
      'all',
      'all',
      MOST_IDS_PER_ROUND,
    ]);
    f.follower.stop();
  });

  it('does nothing while nothing changes (no reconcile when it is 0), and stops on stop()', async () => {
    const f = recorded(0);
    await f.follower.start();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(f.rounds).toEqual(['all']);
    f.follower.stop();
    f.changes.emit('change', 'edg_1');
    await f.follower.syncIds(['edg_2']);
    expect(f.rounds).toEqual(['all']);
  });

  it('reconciles everything every everyMs when set', async () => {
    const f = recorded(20);
    await f.follower.start();
    await until(() => f.rounds.filter((r) => r === 'all').length >= 3);
    f.follower.stop();
    expect(f.rounds.every((r) => r === 'all')).toBe(true);
  });
});
