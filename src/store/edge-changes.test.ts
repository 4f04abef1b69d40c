import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestRepositories, TEST_STORE_SETTINGS } from '../../test/support/api.js';
import { edgeFixtures, type EdgeFixtures } from '../../test/support/edge-fixtures.js';
import {
  createTestDatabase,
  DATABASE_KINDS,
  type TestDatabase,
} from '../../test/support/stores.js';
import { openStore, type Repositories, type Store } from './index.js';

/** What the edge runtime relies on: a 'change' after every committed edge write, and only then. */
describe.each(DATABASE_KINDS)('EdgeRepository changes and serving edges (%s)', (kind) => {
  let db: TestDatabase;
  let store: Store;
  let repos: Repositories;
  let fx: EdgeFixtures;
  const seen: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await openStore({ database: db.database, dataDir: db.dataDir });
    repos = createTestRepositories(store);
    fx = edgeFixtures(store);
    repos.edges.changes.on('change', (id: string) => seen.push(id));
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('announces create, PATCH, module PUT and DELETE, and the edge delete', async () => {
    const addr = await fx.reservedAddr();
    const policy = await fx.ipPolicy();
    seen.length = 0;
    const edge = await repos.edges.create('tcp', { description: 'x' });
    await repos.edges.update('tcp', edge.id, { hostports: [addr.addr] });
    await repos.edges.setModule('tcp', edge.id, 'ip_restriction', { ip_policy_ids: [policy] });
    await repos.edges.deleteModule('tcp', edge.id, 'ip_restriction');
    expect(seen).toEqual([edge.id, edge.id, edge.id, edge.id]);

    await repos.edges.update('tcp', edge.id, {});
    await repos.edges.deleteModule('tcp', edge.id, 'traffic_policy');
    await expect(
      repos.edges.update('tcp', edge.id, { hostports: ['tcp.burrow.test:1'] }),
    ).rejects.toMatchObject({ code: 'ERR_NGROK_7113' });
    expect(seen).toHaveLength(4);

    expect(await repos.edges.delete('tcp', edge.id)).toBe(true);
    expect(await repos.edges.delete('tcp', edge.id)).toBe(false);
    expect(seen).toEqual([edge.id, edge.id, edge.id, edge.id, edge.id]);
  });

  it('lists only edges that have hostports, of both types', async () => {
    const domain = await fx.reservedDomain(`serving-${kind}.example.com`);
    const addr = await fx.reservedAddr();
    await repos.edges.create('tcp', { description: 'idle' });
    const tls = await repos.edges.create('tls', {
      hostports: [`${domain.domain}:${TEST_STORE_SETTINGS.httpsPort}`],
    });
    const tcp = await repos.edges.create('tcp', { hostports: [addr.addr] });
    expect((await repos.edges.listServing()).map((e) => e.id).sort()).toEqual(
      [tls.id, tcp.id].sort(),
    );
    await repos.edges.update('tcp', tcp.id, { hostports: [] });
    expect((await repos.edges.listServing()).map((e) => e.id)).toEqual([tls.id]);
  });
});
