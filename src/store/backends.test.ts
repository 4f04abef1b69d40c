import { describe, expect, it } from 'vitest';
import { withTestStore } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { checkAddress, checkLabels } from './backend-kinds.js';

describe('backend field checks', () => {
  it('copies a valid label map and throws the label codes otherwise', () => {
    const labels = { app: 'web' };
    expect(checkLabels(labels)).toEqual(labels);
    expect(checkLabels(labels)).not.toBe(labels);
    expect(() => checkLabels({ 'a=b': 'c' })).toThrow(
      expect.objectContaining({ code: 'ERR_NGROK_6531', field: 'labels' }),
    );
  });

  it.each([
    ['web:80', 'web:80'],
    ['Web.Internal:8080', 'web.internal:8080'],
    ['10.0.0.5:443', '10.0.0.5:443'],
    ['[2001:db8::1]:443', '[2001:db8::1]:443'],
  ])('accepts the address %s as %s', (input, stored) => {
    expect(checkAddress(input)).toBe(stored);
  });
});

describe.each(DATABASE_KINDS)('BackendRepository (%s)', (kind) => {
  const t = withTestStore(kind);

  it('gets a backend of any type by id, with its type and fields', async () => {
    const tg = await t.repos.backends.tunnelGroups.create({ labels: { app: 'web' } });
    const fo = await t.repos.backends.failovers.create({ backends: [tg.id] });
    const wd = await t.repos.backends.weighted.create({ backends: { [tg.id]: 3 } });
    const sc = await t.repos.backends.statics.create({ address: 'web:80', tls: { enabled: true } });
    expect(await t.repos.backends.get(tg.id)).toEqual({
      ...tg,
      type: 'tunnel_group',
      labels: { app: 'web' },
    });
    expect(await t.repos.backends.get(fo.id)).toMatchObject({
      type: 'failover',
      backends: [tg.id],
    });
    expect(await t.repos.backends.get(wd.id)).toMatchObject({
      type: 'weighted',
      backends: { [tg.id]: 3 },
    });
    expect(await t.repos.backends.get(sc.id)).toMatchObject({
      type: 'static',
      address: 'web:80',
      tls: { enabled: true },
    });
    const any = await t.repos.backends.get(tg.id);
    expect(any?.labels).toEqual({ app: 'web' });
    expect((await t.repos.backends.get(sc.id))?.labels).toBeUndefined();
    expect(await t.repos.backends.get('bkdtg_missing')).toBeUndefined();
  });

  it('tells whether a backend exists, whatever its type', async () => {
    const sc = await t.repos.backends.statics.create({ address: 'db:5432' });
    expect(await t.repos.backends.exists(sc.id)).toBe(true);
    expect(await t.repos.backends.exists('bkdsc_missing')).toBe(false);
    await t.repos.backends.statics.delete(sc.id);
    expect(await t.repos.backends.exists(sc.id)).toBe(false);
  });

  it('records member references and drops them when the backend goes', async () => {
    const a = await t.repos.backends.tunnelGroups.create({ labels: { n: 'a' } });
    const b = await t.repos.backends.tunnelGroups.create({ labels: { n: 'b' } });
    const fo = await t.repos.backends.failovers.create({ backends: [a.id, b.id] });
    const refs = async () =>
      (await t.store.db.selectFrom('refs').select('to_id').where('from_id', '=', fo.id).execute())
        .map((r) => r.to_id)
        .sort();
    expect(await refs()).toEqual([a.id, b.id].sort());
    await t.repos.backends.failovers.update(fo.id, { backends: [b.id] });
    expect(await refs()).toEqual([b.id]);
    await t.repos.backends.failovers.update(fo.id, { description: 'members untouched' });
    expect(await refs()).toEqual([b.id]);
    expect(await t.repos.backends.failovers.delete(fo.id)).toBe(true);
    expect(await refs()).toEqual([]);
  });

  it('leaves nothing behind when a create fails validation', async () => {
    const before = await t.store.db.selectFrom('backends').select('id').execute();
    await expect(
      t.repos.backends.failovers.create({ backends: ['bkdtg_missing'] }),
    ).rejects.toMatchObject({
      code: 'ERR_NGROK_6514',
    });
    expect(await t.store.db.selectFrom('backends').select('id').execute()).toEqual(before);
  });
});
