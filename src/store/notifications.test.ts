import { once } from 'node:events';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StoreNotifications, type StoreNotice } from './notifications.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/stores.js';

/** The next notice on `n` matching `pred`, or a rejection after `ms`. */
function nextNotice(
  n: StoreNotifications,
  pred: (notice: StoreNotice) => boolean,
  ms = 1000,
): Promise<StoreNotice> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      n.off('notice', on);
      reject(new Error(`no matching notice within ${ms} ms`));
    }, ms);
    const on = (notice: StoreNotice) => {
      if (!pred(notice)) return;
      clearTimeout(timer);
      n.off('notice', on);
      resolve(notice);
    };
    n.on('notice', on);
  });
}

describe('StoreNotifications on PostgreSQL', () => {
  let testDb: TestDatabase;
  let admin: pg.Client;
  const open: StoreNotifications[] = [];

  const start = async (from: string, onError?: (err: Error) => void) => {
    const n = await StoreNotifications.start({
      url: testDb.database,
      from,
      onError: onError ?? (() => undefined),
    });
    open.push(n);
    return n;
  };

  beforeAll(async () => {
    testDb = await createTestDatabase('postgres');
    admin = new pg.Client({ connectionString: testDb.database });
    await admin.connect();
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((n) => n.close()));
  });

  afterAll(async () => {
    await admin.end();
    await testDb.drop();
  });

  it('two nodes see each other’s notices, and their own with their own `from`', async () => {
    const a = await start('node-a');
    const b = await start('node-b');
    const atB = nextNotice(b, (n) => n.topic === 'edges');
    const ownAtA = nextNotice(a, (n) => n.topic === 'edges');
    await a.notify('edges', { id: 'edghts_1' });
    expect(await atB).toEqual({ from: 'node-a', topic: 'edges', data: { id: 'edghts_1' } });
    expect(await ownAtA).toEqual({ from: 'node-a', topic: 'edges', data: { id: 'edghts_1' } });
    const atA = nextNotice(a, (n) => n.from === 'node-b');
    await b.notify('settings');
    expect(await atA).toEqual({ from: 'node-b', topic: 'settings' });
  });

  it('reconnects after its backend is terminated, emits resync, and works afterwards', async () => {
    const errors: Error[] = [];
    const a = await start('node-a', (e) => errors.push(e));
    const b = await start('node-b');
    const resync = once(a, 'resync');
    // a's backend: the older of the two listening ones.
    const { rowCount } = await admin.query(
      `SELECT pg_terminate_backend(pid) FROM (
         SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%'
          ORDER BY backend_start LIMIT 1) AS listening`,
    );
    expect(rowCount).toBe(1);
    await resync;
    expect(errors.some((e) => /connection lost/.test(e.message))).toBe(true);
    const atA = nextNotice(a, (n) => n.topic === 'after');
    const atB = nextNotice(b, (n) => n.topic === 'after');
    await a.notify('after', 1);
    expect((await atA).data).toBe(1);
    expect((await atB).data).toBe(1);
  });

  it('sends while its own listening connection is down, over a connection of its own', async () => {
    const a = await start('node-a');
    const b = await start('node-b');
    const lost = new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        // Reaching into the private field: the only way to see the gap between loss and resync.
        if ((a as unknown as { client: unknown }).client === undefined) {
          clearInterval(poll);
          resolve();
        }
      }, 1);
    });
    await admin.query(
      `SELECT pg_terminate_backend(pid) FROM (
         SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%'
          ORDER BY backend_start LIMIT 1) AS listening`,
    );
    await lost;
    const atB = nextNotice(b, (n) => n.topic === 'meanwhile');
    await a.notify('meanwhile');
    expect((await atB).from).toBe('node-a');
  });

  it('ignores malformed payloads, reporting them', async () => {
    const errors: Error[] = [];
    const a = await start('node-a', (e) => errors.push(e));
    const received: StoreNotice[] = [];
    a.on('notice', (n) => received.push(n));
    for (const payload of ['not json', '[1]', 'null', '{"from":1,"topic":"x"}', '{"from":"x"}']) {
      await admin.query('SELECT pg_notify($1, $2)', ['burrow', payload]);
    }
    const good = nextNotice(a, (n) => n.topic === 'good');
    await admin.query('SELECT pg_notify($1, $2)', ['burrow', '{"from":"psql","topic":"good"}']);
    await good;
    expect(received).toEqual([{ from: 'psql', topic: 'good' }]);
    expect(errors.filter((e) => /malformed/.test(e.message))).toHaveLength(5);
  });

  it('a throwing listener is reported, not thrown at the connection', async () => {
    const errors: Error[] = [];
    const a = await start('node-a', (e) => errors.push(e));
    a.on('notice', (n) => {
      if (n.topic === 'boom') throw new Error('listener failed');
    });
    await a.notify('boom');
    const after = nextNotice(a, (n) => n.topic === 'after');
    await a.notify('after');
    await after;
    expect(errors.some((e) => /listener failed/.test(e.message))).toBe(true);
  });

  it('refuses payloads PostgreSQL would refuse, with a clear error', async () => {
    const a = await start('node-a');
    await expect(a.notify('big', 'x'.repeat(8000))).rejects.toThrow(/under 8000 bytes/);
    // Just under the limit still goes through.
    const overhead = JSON.stringify({ from: 'node-a', topic: 'fits', data: '' }).length;
    const fits = nextNotice(a, (n) => n.topic === 'fits');
    await a.notify('fits', 'x'.repeat(7999 - overhead));
    expect(((await fits).data as string).length).toBe(7999 - overhead);
  });

  it('keeps other channels apart', async () => {
    const a = await start('node-a');
    const other = await StoreNotifications.start({
      url: testDb.database,
      from: 'node-o',
      channel: 'burrow_other',
    });
    open.push(other);
    const received: StoreNotice[] = [];
    a.on('notice', (n) => received.push(n));
    const atOther = nextNotice(other, (n) => n.topic === 'x');
    await other.notify('x');
    await atOther;
    const atA = nextNotice(a, (n) => n.topic === 'y');
    await a.notify('y');
    await atA;
    expect(received.map((n) => n.topic)).toEqual(['y']);
  });

  it('rejects start when the database cannot be reached, and notify after close', async () => {
    const url = new URL(testDb.database);
    url.pathname = '/burrow_no_such_database';
    await expect(StoreNotifications.start({ url: url.toString(), from: 'x' })).rejects.toThrow();
    const a = await start('node-a');
    await a.close();
    await expect(a.notify('late')).rejects.toThrow(/closed/);
  });
});
