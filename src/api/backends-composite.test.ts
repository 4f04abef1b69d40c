import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const TG = '/backends/tunnel_group';
const FO = '/backends/failover';
const WD = '/backends/weighted';
const SC = '/backends/static';

describe.each(DATABASE_KINDS)('failover, weighted and static backends API (%s)', (kind) => {
  let api: TestApi;
  const tunnelGroup = async (app: string): Promise<string> =>
    (await api.call('POST', TG, { labels: { app } })).body.id;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  describe('failover', () => {
    it('creates, gets, updates, lists and deletes, keeping member order', async () => {
      const [a, b] = [await tunnelGroup('a'), await tunnelGroup('b')];
      const res = await api.call('POST', FO, { description: 'primary then b', backends: [b, a] });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^bkdfo_[0-9A-Za-z]{27}$/),
        uri: `${TEST_BASE_URL}/backends/failover/${res.body.id}`,
        created_at: expect.any(String),
        description: 'primary then b',
        metadata: '',
        backends: [b, a],
      });
      expect((await api.call('GET', `${FO}/${res.body.id}`)).body).toEqual(res.body);
      const patched = await api.call('PATCH', `${FO}/${res.body.id}`, { backends: [a] });
      expect(patched.body).toEqual({ ...res.body, backends: [a] });
      // b is no longer referenced, so it can go; a still is.
      expect((await api.call('DELETE', `${TG}/${b}`)).status).toBe(204);
      expect((await api.call('DELETE', `${TG}/${a}`)).status).toBe(409);
      expect((await api.call('DELETE', `${FO}/${res.body.id}`)).status).toBe(204);
      expect((await api.call('DELETE', `${TG}/${a}`)).status).toBe(204);
    });

    it('refuses unknown, duplicate and missing members', async () => {
      const a = await tunnelGroup('m');
      const unknown = await api.call('POST', FO, { backends: [a, 'bkdtg_nothere'] });
      expect(unknown.status).toBe(400);
      expect(unknown.body).toMatchObject({
        error_code: 'ERR_NGROK_6514',
        details: { field: 'backends[1]' },
      });
      expect(unknown.body.msg).toContain('bkdtg_nothere');
      const twice = await api.call('POST', FO, { backends: [a, a] });
      expect(twice.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'backends[1]' },
      });
      const empty = await api.call('POST', FO, { backends: [] });
      expect(empty.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'backends' },
      });
      const missing = await api.call('POST', FO, {});
      expect(missing.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        msg: 'backends: is required',
      });
    });

    it('refuses loops: itself, directly and through other backends', async () => {
      const leaf = await tunnelGroup('loop');
      const { body: inner } = await api.call('POST', FO, { backends: [leaf] });
      const { body: outer } = await api.call('POST', WD, { backends: { [inner.id]: 1 } });
      const self = await api.call('PATCH', `${FO}/${inner.id}`, { backends: [inner.id] });
      expect(self.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'backends[0]' },
      });
      const loop = await api.call('PATCH', `${FO}/${inner.id}`, { backends: [leaf, outer.id] });
      expect(loop.status).toBe(400);
      expect(loop.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'backends[1]' },
      });
      expect(loop.body.msg).toContain('loop');
      expect((await api.call('GET', `${FO}/${inner.id}`)).body.backends).toEqual([leaf]);
    });

    it('names the referring backend when refusing a delete (409 ERR_NGROK_6502)', async () => {
      const a = await tunnelGroup('ref');
      const { body: fo } = await api.call('POST', FO, { backends: [a] });
      const res = await api.call('DELETE', `${TG}/${a}`);
      expect(res.status).toBe(409);
      expect(res.body.error_code).toBe('ERR_NGROK_6502');
      expect(res.body.msg).toContain(fo.id);
    });
  });

  describe('weighted', () => {
    it('creates with weights 0..10000 and replaces the map on PATCH', async () => {
      const [a, b] = [await tunnelGroup('wa'), await tunnelGroup('wb')];
      const res = await api.call('POST', WD, { backends: { [a]: 0, [b]: 10000 } });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^bkdwd_[0-9A-Za-z]{27}$/),
        uri: `${TEST_BASE_URL}/backends/weighted/${res.body.id}`,
        created_at: expect.any(String),
        description: '',
        metadata: '',
        backends: { [a]: 0, [b]: 10000 },
      });
      const patched = await api.call('PATCH', `${WD}/${res.body.id}`, { backends: { [b]: 5 } });
      expect(patched.body.backends).toEqual({ [b]: 5 });
      expect((await api.call('DELETE', `${TG}/${a}`)).status).toBe(204);
      const refused = await api.call('DELETE', `${TG}/${b}`);
      expect(refused.status).toBe(409);
      expect(refused.body.msg).toContain(res.body.id);
    });

    it.each([
      ['negative', -1, 'must be >= 0'],
      ['too large', 10001, 'must be <= 10000'],
      ['fractional', 1.5, 'must be an integer'],
    ])('refuses a %s weight naming the member', async (_, weight, why) => {
      const a = await tunnelGroup('weight');
      const res = await api.call('POST', WD, { backends: { [a]: weight } });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: `backends.${a}` },
      });
      expect(res.body.msg).toContain(why);
    });

    it('refuses an unknown member with ERR_NGROK_6514', async () => {
      const res = await api.call('POST', WD, { backends: { bkdsc_gone: 1 } });
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_6514',
        details: { field: 'backends.bkdsc_gone' },
      });
    });
  });

  describe('static', () => {
    it('creates with tls off by default, updates address and tls', async () => {
      const res = await api.call('POST', SC, { address: 'Web.Internal:8080' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^bkdsc_[0-9A-Za-z]{27}$/),
        uri: `${TEST_BASE_URL}/backends/static/${res.body.id}`,
        created_at: expect.any(String),
        description: '',
        metadata: '',
        address: 'web.internal:8080',
        tls: { enabled: false },
      });
      const tls = await api.call('PATCH', `${SC}/${res.body.id}`, { tls: { enabled: true } });
      expect(tls.body).toMatchObject({ address: 'web.internal:8080', tls: { enabled: true } });
      const addr = await api.call('PATCH', `${SC}/${res.body.id}`, { address: '[::1]:443' });
      expect(addr.body).toMatchObject({ address: '[::1]:443', tls: { enabled: true } });
      expect((await api.call('DELETE', `${SC}/${res.body.id}`)).status).toBe(204);
    });

    it.each(['web', 'web:0', 'web:65536', '*.x.io:80', 'a b:80', '[zz]:80', 'http://web:80'])(
      'refuses the address %j',
      async (address) => {
        const res = await api.call('POST', SC, { address });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({
          error_code: 'ERR_NGROK_215',
          details: { field: 'address' },
        });
      },
    );

    it('refuses unknown fields inside tls', async () => {
      const res = await api.call('POST', SC, { address: 'web:80', tls: { verify: true } });
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_214',
        details: { field: 'tls.verify' },
      });
    });
  });

  it('keeps each type to its own path: other types are 404 and absent from lists', async () => {
    const tg = await tunnelGroup('types');
    const { body: sc } = await api.call('POST', SC, { address: 'web:80' });
    for (const other of [FO, WD, SC]) {
      expect((await api.call('GET', `${other}/${tg}`)).status).toBe(404);
      expect((await api.call('PATCH', `${other}/${tg}`, {})).status).toBe(404);
      expect((await api.call('DELETE', `${other}/${tg}`)).status).toBe(404);
    }
    expect((await api.call('GET', `${TG}/${sc.id}`)).status).toBe(404);
    const tgList = (await api.call('GET', TG)).body.backends.map((b: { id: string }) => b.id);
    expect(tgList).toContain(tg);
    expect(tgList).not.toContain(sc.id);
    const scList = (await api.call('GET', SC)).body.backends.map((b: { id: string }) => b.id);
    expect(scList).toEqual([sc.id]);
    expect((await api.call('GET', `${TG}/${tg}`)).status).toBe(200);
  });
});
