import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../core/ids.js';
import { setRefs } from '../store/refs.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import type { OnlineState } from './context.js';

/** Online tunnels by id and labels; `tunnelsMatching` is the superset match the edge implements. */
const onlineTunnels: Record<string, Record<string, string>> = {};
const online: OnlineState = {
  tunnelsMatching: (labels) =>
    Object.entries(onlineTunnels)
      .filter(([, have]) => Object.entries(labels).every(([k, v]) => have[k] === v))
      .map(([id]) => id),
};

const TG = '/backends/tunnel_group';

describe.each(DATABASE_KINDS)('tunnel group backends API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind, { online });
  });
  afterAll(async () => api.close());

  it('creates a tunnel group as in the reference: 201 with tunnels []', async () => {
    const res = await api.call('POST', TG, {
      description: 'acme tunnel group',
      labels: { baz: 'qux', foo: 'bar' },
      metadata: '{"environment": "staging"}',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bkdtg_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/backends/tunnel_group/${res.body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      description: 'acme tunnel group',
      metadata: '{"environment": "staging"}',
      labels: { baz: 'qux', foo: 'bar' },
      tunnels: [],
    });
  });

  it('shows the online tunnels whose labels are a superset of the selector', async () => {
    const { body: tg } = await api.call('POST', TG, { labels: { app: 'dashboard', version: '1' } });
    expect(tg.tunnels).toEqual([]);
    const match = newId('tn');
    const other = newId('tn');
    onlineTunnels[match] = { app: 'dashboard', version: '1', color: 'blue' };
    onlineTunnels[other] = { app: 'dashboard', version: '2' };
    try {
      const got = await api.call('GET', `${TG}/${tg.id}`);
      expect(got.body.tunnels).toEqual([{ id: match, uri: `${TEST_BASE_URL}/tunnels/${match}` }]);
      const list = await api.call('GET', TG);
      const listed = list.body.backends.find((b: { id: string }) => b.id === tg.id);
      expect(listed.tunnels).toEqual([{ id: match, uri: `${TEST_BASE_URL}/tunnels/${match}` }]);
      // After a PATCH the reply reflects the new selector.
      const patched = await api.call('PATCH', `${TG}/${tg.id}`, { labels: { version: '2' } });
      expect(patched.body.tunnels.map((t: { id: string }) => t.id)).toEqual([other]);
    } finally {
      delete onlineTunnels[match];
      delete onlineTunnels[other];
    }
    expect((await api.call('GET', `${TG}/${tg.id}`)).body.tunnels).toEqual([]);
  });

  it('gets, updates (labels replace the whole map), lists and deletes', async () => {
    const { body: tg } = await api.call('POST', TG, { labels: { a: '1', b: '2' } });
    expect((await api.call('GET', `${TG}/${tg.id}`)).body).toEqual(tg);
    const patched = await api.call('PATCH', `${TG}/${tg.id}`, {
      description: 'now described',
      labels: { c: '3' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...tg, description: 'now described', labels: { c: '3' } });
    const meta = await api.call('PATCH', `${TG}/${tg.id}`, { metadata: 'm' });
    expect(meta.body).toEqual({ ...patched.body, metadata: 'm' });
    const empty = await api.call('PATCH', `${TG}/${tg.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(meta.body);
    const list = await api.call('GET', TG);
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/backends/tunnel_group`);
    expect(list.body.backends.map((b: { id: string }) => b.id)).toContain(tg.id);
    await expectDeletedForGood(api, `${TG}/${tg.id}`);
  });

  it('requires labels on create', async () => {
    const res = await api.call('POST', TG, { description: 'x' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_215', msg: 'labels: is required' });
  });

  it.each([
    ['no labels', {}, 'ERR_NGROK_6508', 'labels', 'at least one label'],
    [
      'eleven labels',
      Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v'])),
      'ERR_NGROK_6508',
      'labels',
      'at most 10 labels; got 11',
    ],
    ['long key', { ['k'.repeat(65)]: 'v' }, 'ERR_NGROK_6509', 'labels', 'between 1 and 64'],
    ['empty key', { '': 'v' }, 'ERR_NGROK_6509', 'labels', 'between 1 and 64'],
    ['bad key', { 'my app': 'v' }, 'ERR_NGROK_6509', 'labels', 'may contain only'],
    ['long value', { app: 'v'.repeat(129) }, 'ERR_NGROK_6510', 'labels.app', 'between 1 and 128'],
    ['empty value', { app: '' }, 'ERR_NGROK_6510', 'labels.app', 'between 1 and 128'],
    ['bad value', { app: 'a*b' }, 'ERR_NGROK_6510', 'labels.app', 'may contain only'],
    ['= in key', { 'a=b': 'v' }, 'ERR_NGROK_6531', 'labels', "must not contain '='"],
    ['= in value', { app: 'x=y' }, 'ERR_NGROK_6531', 'labels.app', "must not contain '='"],
  ])('refuses %s', async (_, labels, code, field, why) => {
    const res = await api.call('POST', TG, { labels });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error_code: code, details: { field } });
    expect(res.body.msg).toContain(why);
  });

  it('accepts labels at the limits, including operator-style keys', async () => {
    const labels = {
      ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, 'v'])),
      ['k'.repeat(64)]: 'v'.repeat(128),
      'k8s.ngrok.com/service': 'web:8080',
    };
    const res = await api.call('POST', TG, { labels });
    expect(res.status).toBe(201);
    expect(res.body.labels).toEqual(labels);
  });

  it('refuses bad labels in a PATCH and changes nothing', async () => {
    const { body: tg } = await api.call('POST', TG, { labels: { app: 'web' } });
    const res = await api.call('PATCH', `${TG}/${tg.id}`, { description: 'x', labels: {} });
    expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_6508', details: { field: 'labels' } });
    expect((await api.call('GET', `${TG}/${tg.id}`)).body).toEqual(tg);
  });

  it('refuses non-string label values and unknown fields', async () => {
    const num = await api.call('POST', TG, { labels: { app: 1 } });
    expect(num.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'labels.app: must be a string',
    });
    const tunnels = await api.call('POST', TG, { labels: { a: 'b' }, tunnels: [] });
    expect(tunnels.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'tunnels' },
    });
  });

  it('refuses to delete a tunnel group an edge uses, naming the edge (409 ERR_NGROK_6502)', async () => {
    const { body: tg } = await api.call('POST', TG, { labels: { app: 'web' } });
    const edgeId = newId('edgtcp');
    await setRefs(api.store.db, edgeId, [tg.id]);
    const res = await api.call('DELETE', `${TG}/${tg.id}`);
    expect(res.status).toBe(409);
    expect(res.body.error_code).toBe('ERR_NGROK_6502');
    expect(res.body.msg).toContain(edgeId);
    expect((await api.call('GET', `${TG}/${tg.id}`)).status).toBe(200);
    await setRefs(api.store.db, edgeId, []);
    expect((await api.call('DELETE', `${TG}/${tg.id}`)).status).toBe(204);
  });

  it('pages newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await api.call('POST', TG, { labels: { n: `${i}` } })).body.id);
    const page = await api.call('GET', `${TG}?limit=2`);
    expect(page.body.backends.map((b: { id: string }) => b.id)).toEqual([ids[2], ids[1]]);
    expect(page.body.next_page_uri).toBe(`${TEST_BASE_URL}${TG}?before_id=${ids[1]}&limit=2`);
  });
});
