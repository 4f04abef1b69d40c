import { describe, expect, it } from 'vitest';
import { withTestStore } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('ReservedAddrRepository (%s)', (kind) => {
  const t = withTestStore(kind, {
    tcpHost: 'TCP.Burrow.Test',
    tcpPorts: { first: 40000, last: 40004 },
  });

  it('stores the address with the host lowercased and finds it by host:port', async () => {
    const ra = await t.repos.reservedAddrs.create({});
    expect(ra.addr).toBe('tcp.burrow.test:40000');
    expect(await t.repos.reservedAddrs.findByAddr('TCP.burrow.test:40000')).toEqual(ra);
    expect(await t.repos.reservedAddrs.findByAddr('tcp.burrow.test:40001')).toBeUndefined();
    expect(await t.repos.reservedAddrs.findByAddr('other.test:40000')).toBeUndefined();
  });

  it('skips ports outside the range and fills the first gap', async () => {
    // A reservation made under an earlier, wider range must not confuse the gap search.
    await t.store.db
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
    const b = await t.repos.reservedAddrs.create({});
    const c = await t.repos.reservedAddrs.create({});
    expect([b.addr, c.addr]).toEqual(['tcp.burrow.test:40001', 'tcp.burrow.test:40002']);
    expect(await t.repos.reservedAddrs.delete(b.id)).toBe(true);
    expect((await t.repos.reservedAddrs.create({})).addr).toBe('tcp.burrow.test:40001');
    expect(await t.repos.reservedAddrs.delete(b.id)).toBe(false);
  });
});
