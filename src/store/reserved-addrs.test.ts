import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestRepositories } from '../test-support/api.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../test-support/stores.js';
import { openStore, type Repositories, type Store } from './index.js';

describe.each(DATABASE_KINDS)('ReservedAddrRepository (%s)', (kind) => {
  let db: TestDatabase;
  let store: Store;
  let repos: Repositories;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await openStore({ database: db.database, dataDir: db.dataDir });
    repos = createTestRepositories(store, {
      tcpHost: 'TCP.Burrow.Test',
      tcpPorts: { first: 40000, last: 40004 },
    });
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('stores the address with the host lowercased and finds it by host:port', async () => {
    const ra = await repos.reservedAddrs.create({});
    expect(ra.addr).toBe('tcp.burrow.test:40000');
    expect(await repos.reservedAddrs.findByAddr('TCP.burrow.test:40000')).toEqual(ra);
    expect(await repos.reservedAddrs.findByAddr('tcp.burrow.test:40001')).toBeUndefined();
    expect(await repos.reservedAddrs.findByAddr('other.test:40000')).toBeUndefined();
  });

  it('skips ports outside the range and fills the first gap', async () => {
    // A reservation made under an earlier, wider range must not confuse the gap search.
    await store.db
      .insertInto('reserved_addrs')
      .values({
        id: 'ra_00000000000000000000000001',
        description: '',
        metadata: '',
        created_at: '2025-01-01T00:00:00Z',
        addr: 'tcp.burrow.test:39999',
        port: 39999,
        region: '',
      })
      .execute();
    const b = await repos.reservedAddrs.create({});
    const c = await repos.reservedAddrs.create({});
    expect([b.addr, c.addr]).toEqual(['tcp.burrow.test:40001', 'tcp.burrow.test:40002']);
    expect(await repos.reservedAddrs.delete(b.id)).toBe(true);
    expect((await repos.reservedAddrs.create({})).addr).toBe('tcp.burrow.test:40001');
    expect(await repos.reservedAddrs.delete(b.id)).toBe(false);
  });
});
