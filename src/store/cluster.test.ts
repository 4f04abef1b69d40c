import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ClusterRepository, type OnlineSessionRow, type OnlineTunnelRow } from './cluster.js';
import { isForeignKeyViolation, openStore, type Store } from './database.js';
import {
  createTestDatabase,
  DATABASE_KINDS,
  type TestDatabase,
} from '../../test/support/stores.js';

const STARTED = '2025-01-01T00:00:00.000Z';

function session(id: string, nodeId: string): OnlineSessionRow {
  return { id, nodeId, credentialId: 'cr_1', data: { ip: '192.0.2.1', os: 'linux' } };
}

function tunnel(
  id: string,
  sessionId: string,
  nodeId: string,
  routeKey: string | null,
  extra: { pooling?: boolean; bindId?: string } = {},
): OnlineTunnelRow {
  return {
    id,
    sessionId,
    nodeId,
    routeKey,
    pooling: extra.pooling ?? false,
    data: { bindId: extra.bindId ?? `bind_${id}`, url: `https://${id}.example.test` },
  };
}

describe.each(DATABASE_KINDS)('ClusterRepository on %s', (kind) => {
  let testDb: TestDatabase;
  let store: Store;
  let cluster: ClusterRepository;

  beforeAll(async () => {
    testDb = await createTestDatabase(kind);
    store = await openStore({ database: testDb.database, dataDir: testDb.dataDir });
    cluster = new ClusterRepository(store.db, store.dialect);
  });

  afterAll(async () => {
    await store.close();
    await testDb.drop();
  });

  beforeEach(async () => {
    await store.db.deleteFrom('nodes').execute();
    for (const id of ['n1', 'n2']) {
      await cluster.register({ id, role: 'all', linkAddress: `${id}:7070`, startedAt: STARTED });
    }
    await cluster.putSession(session('s1', 'n1'));
    await cluster.putSession(session('s2', 'n2'));
  });

  it('registers nodes, refreshes them, and lists them with their heartbeat age', async () => {
    await cluster.register({ id: 'n1', role: 'edge', linkAddress: '', startedAt: STARTED });
    const nodes = await cluster.nodes();
    expect(nodes.map((n) => [n.id, n.role, n.linkAddress, n.startedAt])).toEqual([
      ['n1', 'edge', '', STARTED],
      ['n2', 'all', 'n2:7070', STARTED],
    ]);
    for (const n of nodes) {
      expect(n.ageMs).toBeGreaterThanOrEqual(0);
      expect(n.ageMs).toBeLessThan(5000);
    }
    expect(await cluster.heartbeat('n1')).toBe(true);
    expect(await cluster.heartbeat('gone')).toBe(false);
  });

  it('reaps nothing while heartbeats are fresh, and everything past a zero tolerance', async () => {
    expect(await cluster.reapLapsed(60_000)).toEqual([]);
    await new Promise((r) => setTimeout(r, 20));
    expect(await cluster.reapLapsed(0)).toEqual(['n1', 'n2']);
    expect(await cluster.nodes()).toEqual([]);
    expect(await cluster.heartbeat('n1')).toBe(false);
  });

  it('unregister removes the node with its sessions and tunnels', async () => {
    await cluster.claimTunnel(tunnel('t1', 's1', 'n1', 'h:a.example.test'));
    await cluster.claimTunnel(tunnel('t2', 's2', 'n2', 'h:b.example.test'));
    await cluster.unregister('n1');
    const { sessions, tunnels } = await cluster.online();
    expect(sessions.map((s) => s.id)).toEqual(['s2']);
    expect(tunnels.map((t) => t.id)).toEqual(['t2']);
  });

  it('round-trips sessions and tunnels, and filters by node', async () => {
    await cluster.putSession({ ...session('s1', 'n1'), data: { ip: '198.51.100.7' } });
    const t1 = tunnel('t1', 's1', 'n1', 'p:20001', { pooling: true });
    await cluster.claimTunnel(t1);
    await cluster.claimTunnel(tunnel('t2', 's2', 'n2', null));
    await cluster.updateTunnel('t1', { ...t1.data, url: 'tcp://example.test:20001' });
    const all = await cluster.online();
    expect(all.sessions).toEqual([
      { id: 's1', nodeId: 'n1', credentialId: 'cr_1', data: { ip: '198.51.100.7' } },
      session('s2', 'n2'),
    ]);
    expect(all.tunnels).toEqual([
      { ...t1, data: { ...t1.data, url: 'tcp://example.test:20001' } },
      tunnel('t2', 's2', 'n2', null),
    ]);
    const others = await cluster.online({ exceptNode: 'n1' });
    expect(others.sessions.map((s) => s.id)).toEqual(['s2']);
    expect(others.tunnels.map((t) => t.id)).toEqual(['t2']);
    await cluster.deleteTunnel('t2');
    await cluster.deleteSession('s1');
    expect(await cluster.online()).toEqual({ sessions: [session('s2', 'n2')], tunnels: [] });
  });

  it('refuses a held route key and returns the holder', async () => {
    const held = tunnel('t1', 's1', 'n1', 'h:app.example.test');
    expect(await cluster.claimTunnel(held)).toEqual({ replaced: [] });
    expect(await cluster.claimTunnel(tunnel('t2', 's2', 'n2', 'h:app.example.test'))).toEqual({
      holder: held,
    });
    // A wildcard and the names under it are different keys, as in the edge's registry.
    expect(await cluster.claimTunnel(tunnel('t3', 's2', 'n2', 'h:*.example.test'))).toEqual({
      replaced: [],
    });
    expect((await cluster.online()).tunnels.map((t) => t.id)).toEqual(['t1', 't3']);
  });

  it('labeled tunnels never conflict', async () => {
    await cluster.claimTunnel(tunnel('t1', 's1', 'n1', null));
    expect(await cluster.claimTunnel(tunnel('t2', 's2', 'n2', null))).toEqual({ replaced: [] });
    expect((await cluster.online()).tunnels).toHaveLength(2);
  });

  it('a resumed session takes its predecessor’s key over, across nodes', async () => {
    const old = tunnel('t1', 's1', 'n1', 'h:app.example.test', { bindId: 'b1' });
    await cluster.claimTunnel(old);
    await cluster.putSession(session('s3', 'n2'));
    const next = tunnel('t2', 's3', 'n2', 'h:app.example.test', { bindId: 'b1' });
    expect(await cluster.claimTunnel(next, { takeoverFrom: 's1' })).toEqual({ replaced: [old] });
    expect((await cluster.online()).tunnels).toEqual([next]);
  });

  it('the same session re-binding the same bind id replaces its tunnel', async () => {
    const first = tunnel('t1', 's1', 'n1', 'p:20001', { bindId: 'b1' });
    await cluster.claimTunnel(first);
    // Another bind id of the same session is somebody else as far as the key goes.
    expect(
      await cluster.claimTunnel(tunnel('t2', 's1', 'n1', 'p:20001', { bindId: 'b2' })),
    ).toEqual({ holder: first });
    const again = tunnel('t3', 's1', 'n1', 'p:20001', { bindId: 'b1' });
    expect(await cluster.claimTunnel(again)).toEqual({ replaced: [first] });
    expect((await cluster.online()).tunnels).toEqual([again]);
  });

  it('pooling tunnels join each other; a non-pooling holder or newcomer is refused', async () => {
    const a = tunnel('t1', 's1', 'n1', 'i:api.internal', { pooling: true });
    const b = tunnel('t2', 's2', 'n2', 'i:api.internal', { pooling: true });
    await cluster.claimTunnel(a);
    expect(await cluster.claimTunnel(b)).toEqual({ replaced: [] });
    // A newcomer that does not pool is refused by a pool.
    expect(await cluster.claimTunnel(tunnel('t3', 's2', 'n2', 'i:api.internal'))).toEqual({
      holder: a,
    });
    // A holder that does not pool refuses a pooling newcomer.
    const alone = tunnel('t4', 's1', 'n1', 'h:alone.example.test');
    await cluster.claimTunnel(alone);
    expect(
      await cluster.claimTunnel(
        tunnel('t5', 's2', 'n2', 'h:alone.example.test', { pooling: true }),
      ),
    ).toEqual({ holder: alone });
    expect((await cluster.online()).tunnels.map((t) => t.id)).toEqual(['t1', 't2', 't4']);
  });

  it('republish replaces a node’s rows, skipping keys another node took meanwhile', async () => {
    await cluster.claimTunnel(tunnel('t1', 's1', 'n1', 'h:gone.example.test'));
    // n1 was reaped while paused; n2 took one of its names and pools on another.
    await cluster.unregister('n1');
    await cluster.claimTunnel(tunnel('t10', 's2', 'n2', 'h:taken.example.test'));
    await cluster.claimTunnel(tunnel('t11', 's2', 'n2', 'p:20002', { pooling: true }));
    await cluster.register({ id: 'n1', role: 'all', linkAddress: 'n1:7070', startedAt: STARTED });
    await cluster.putSession(session('stale', 'n1'));
    const sessions = [session('s1', 'n1'), session('s4', 'n1')];
    const tunnels = [
      tunnel('t1', 's1', 'n1', 'h:mine.example.test'),
      tunnel('t2', 's1', 'n1', 'h:taken.example.test'),
      tunnel('t3', 's4', 'n1', 'p:20002', { pooling: true }),
      tunnel('t4', 's4', 'n1', 'p:20002', { pooling: true }),
      tunnel('t5', 's4', 'n1', null),
    ];
    const { skipped } = await cluster.republish('n1', sessions, tunnels);
    expect(skipped).toEqual(['t2']);
    const online = await cluster.online();
    expect(online.sessions.map((s) => s.id)).toEqual(['s1', 's2', 's4']);
    expect(online.tunnels.map((t) => t.id)).toEqual(['t1', 't10', 't11', 't3', 't4', 't5']);
  });

  it('writes for a node that is gone fail as foreign-key violations', async () => {
    await cluster.unregister('n1');
    const err: unknown = await cluster.putSession(session('s9', 'n1')).catch((e: unknown) => e);
    expect(isForeignKeyViolation(err)).toBe(true);
  });
});

describe('ClusterRepository on PostgreSQL across processes', () => {
  let testDb: TestDatabase;
  let a: Store;
  let b: Store;
  let clusterA: ClusterRepository;
  let clusterB: ClusterRepository;

  beforeAll(async () => {
    testDb = await createTestDatabase('postgres');
    // Two stores, two pools: as two nodes would be.
    a = await openStore({ database: testDb.database, dataDir: testDb.dataDir });
    b = await openStore({ database: testDb.database, dataDir: testDb.dataDir });
    clusterA = new ClusterRepository(a.db, a.dialect);
    clusterB = new ClusterRepository(b.db, b.dialect);
  });

  afterAll(async () => {
    await a.close();
    await b.close();
    await testDb.drop();
  });

  it('reaps by the database clock only nodes whose heartbeat lapsed, with their rows', async () => {
    await clusterA.register({ id: 'na', role: 'all', linkAddress: '', startedAt: STARTED });
    await clusterB.register({ id: 'nb', role: 'edge', linkAddress: '', startedAt: STARTED });
    await clusterA.putSession(session('sa', 'na'));
    await clusterA.claimTunnel(tunnel('ta', 'sa', 'na', 'h:a.example.test'));
    await sql`update nodes set heartbeat_at = now() - interval '30 seconds' where id = 'na'`.execute(
      a.db,
    );
    const aged = (await clusterB.nodes()).find((n) => n.id === 'na')!;
    expect(aged.ageMs).toBeGreaterThanOrEqual(29_000);
    expect(aged.ageMs).toBeLessThan(40_000);
    // Every node reaps at once: each lapsed node is reported by exactly one of them.
    const reaped = await Promise.all([clusterA.reapLapsed(15_000), clusterB.reapLapsed(15_000)]);
    expect(reaped.flat()).toEqual(['na']);
    expect((await clusterB.nodes()).map((n) => n.id)).toEqual(['nb']);
    expect(await clusterB.online()).toEqual({ sessions: [], tunnels: [] });
    // The reaped node learns it on its next heartbeat.
    expect(await clusterA.heartbeat('na')).toBe(false);
    await clusterA.unregister('nb');
  });

  it('concurrent claims of one key from two nodes: exactly one wins', async () => {
    await clusterA.register({ id: 'na', role: 'all', linkAddress: '', startedAt: STARTED });
    await clusterB.register({ id: 'nb', role: 'all', linkAddress: '', startedAt: STARTED });
    const rounds = 25;
    for (let i = 0; i < rounds; i++) {
      await clusterA.putSession(session(`sa${i}`, 'na'));
      await clusterB.putSession(session(`sb${i}`, 'nb'));
    }
    const results = await Promise.all(
      Array.from({ length: rounds }, (_, i) =>
        Promise.all([
          clusterA.claimTunnel(tunnel(`ta${i}`, `sa${i}`, 'na', `h:race${i}.example.test`)),
          clusterB.claimTunnel(tunnel(`tb${i}`, `sb${i}`, 'nb', `h:race${i}.example.test`)),
        ]),
      ),
    );
    for (const pair of results) {
      expect(pair.filter((r) => 'replaced' in r)).toHaveLength(1);
      expect(pair.filter((r) => 'holder' in r)).toHaveLength(1);
    }
    const { tunnels } = await clusterA.online();
    expect(tunnels).toHaveLength(rounds);
    expect(new Set(tunnels.map((t) => t.routeKey)).size).toBe(rounds);
    await clusterA.unregister('na');
    await clusterA.unregister('nb');
  });

  it('republish does not race a concurrent claim of the same key', async () => {
    await clusterA.register({ id: 'na', role: 'all', linkAddress: '', startedAt: STARTED });
    await clusterB.register({ id: 'nb', role: 'all', linkAddress: '', startedAt: STARTED });
    await clusterB.putSession(session('sb', 'nb'));
    const keys = Array.from({ length: 20 }, (_, i) => `p:${30000 + i}`);
    const [republished, claims] = await Promise.all([
      clusterA.republish(
        'na',
        [session('sa', 'na')],
        keys.map((k, i) => tunnel(`ta${i}`, 'sa', 'na', k)),
      ),
      Promise.all(keys.map((k, i) => clusterB.claimTunnel(tunnel(`tb${i}`, 'sb', 'nb', k)))),
    ]);
    const claimed = claims.filter((c) => 'replaced' in c).length;
    expect(claimed + (keys.length - republished.skipped.length)).toBe(keys.length);
    const { tunnels } = await clusterA.online();
    expect(tunnels).toHaveLength(keys.length);
    expect(new Set(tunnels.map((t) => t.routeKey)).size).toBe(keys.length);
  });
});
