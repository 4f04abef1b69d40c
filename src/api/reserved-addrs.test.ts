import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('reserved addresses API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  const create = async (body?: unknown) => api.call('POST', '/reserved_addrs', body);

  it('creates an address on the lowest free port, with or without a body', async () => {
    const res = await create({ description: 'ssh', metadata: '{"env":"lab"}', region: 'eu' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^ra_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/reserved_addrs/${res.body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      description: 'ssh',
      metadata: '{"env":"lab"}',
      addr: 'tcp.burrow.test:20000',
      region: 'eu',
      endpoint_configuration: null,
    });
    const noBody = await create();
    expect(noBody.status).toBe(201);
    expect(noBody.body).toMatchObject({
      addr: 'tcp.burrow.test:20001',
      description: '',
      metadata: '',
      region: '',
    });
    const emptyBody = await create({});
    expect(emptyBody.body.addr).toBe('tcp.burrow.test:20002');
  });

  it('reuses the lowest port freed by a delete', async () => {
    const a = (await create()).body;
    const b = (await create()).body;
    const c = (await create()).body;
    const port = (x: { addr: string }) => Number(x.addr.split(':')[1]);
    expect([port(b), port(c)]).toEqual([port(a) + 1, port(a) + 2]);
    expect((await api.call('DELETE', `/reserved_addrs/${b.id}`)).status).toBe(204);
    expect((await create()).body.addr).toBe(b.addr);
    expect(port((await create()).body)).toBe(port(c) + 1);
  });

  it('refuses unknown fields, an addr chosen by the client and bad values, naming the field', async () => {
    const addr = await create({ addr: 'tcp.burrow.test:20500' });
    expect(addr.status).toBe(400);
    expect(addr.body).toMatchObject({ error_code: 'ERR_NGROK_214', details: { field: 'addr' } });
    const desc = await create({ description: 'x'.repeat(256) });
    expect(desc.body).toMatchObject({
      error_code: 'ERR_NGROK_7073',
      details: { field: 'description' },
    });
    const meta = await create({ metadata: 'x'.repeat(4097) });
    expect(meta.body).toMatchObject({
      error_code: 'ERR_NGROK_100',
      details: { field: 'metadata' },
    });
    const region = await create({ region: 7 });
    expect(region.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'region: must be a string',
    });
  });

  it('gets, updates only description and metadata, lists and deletes', async () => {
    const { body: ra } = await create({ description: 'before', region: 'us' });
    expect((await api.call('GET', `/reserved_addrs/${ra.id}`)).body).toEqual(ra);
    const patched = await api.call('PATCH', `/reserved_addrs/${ra.id}`, { description: 'after' });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...ra, description: 'after' });
    const empty = await api.call('PATCH', `/reserved_addrs/${ra.id}`, {});
    expect(empty.body).toEqual(patched.body);
    const region = await api.call('PATCH', `/reserved_addrs/${ra.id}`, { region: 'eu' });
    expect(region.status).toBe(400);
    expect(region.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'region' },
    });
    const list = await api.call('GET', '/reserved_addrs');
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/reserved_addrs`);
    expect(list.body.reserved_addrs[0]).toEqual(patched.body);
    expect((await api.call('DELETE', `/reserved_addrs/${ra.id}`)).status).toBe(204);
    expect((await api.call('GET', `/reserved_addrs/${ra.id}`)).status).toBe(404);
    expect((await api.call('PATCH', `/reserved_addrs/${ra.id}`, {})).status).toBe(404);
    expect((await api.call('DELETE', `/reserved_addrs/${ra.id}`)).status).toBe(404);
  });

  it('refuses to delete an address that is a TCP edge hostport, naming the edge', async () => {
    const { body: ra } = await create();
    const edgeId = 'edgtcp_32ELI23DHprIRKfgbhhOlEu9Sb7';
    await api.store.db
      .insertInto('edges')
      .values({
        id: edgeId,
        created_at: '2025-01-01T00:00:00Z',
        type: 'tcp',
        description: '',
        metadata: '',
      })
      .execute();
    await api.store.db
      .insertInto('edge_hostports')
      .values({ hostport: ra.addr, edge_id: edgeId, target_id: ra.id })
      .execute();
    const res = await api.call('DELETE', `/reserved_addrs/${ra.id}`);
    expect(res.status).toBe(409);
    expect(res.body.error_code).toBe('ERR_NGROK_446');
    expect(res.body.msg).toContain(edgeId);
    expect(res.body.msg).toContain(ra.addr);
    expect((await api.call('GET', `/reserved_addrs/${ra.id}`)).body).toEqual(ra);
    await api.store.db.deleteFrom('edges').where('id', '=', edgeId).execute();
    expect((await api.call('DELETE', `/reserved_addrs/${ra.id}`)).status).toBe(204);
  });

  it('answers 503 naming --tcp-ports when a 2-port range is exhausted, and recovers after a delete', async () => {
    const small = await createTestApi(kind, {
      settings: { tcpPorts: { first: 20000, last: 20001 } },
    });
    try {
      const first = await small.call('POST', '/reserved_addrs', {});
      const second = await small.call('POST', '/reserved_addrs', {});
      expect([first.body.addr, second.body.addr]).toEqual([
        'tcp.burrow.test:20000',
        'tcp.burrow.test:20001',
      ]);
      const third = await small.call('POST', '/reserved_addrs', {});
      expect(third.status).toBe(503);
      expect(third.body.error_code).toBe('ERR_NGROK_503');
      expect(third.body.msg).toContain('20000-20001');
      expect(third.body.msg).toContain('--tcp-ports');
      expect((await small.call('GET', '/reserved_addrs')).body.reserved_addrs).toHaveLength(2);
      await small.call('DELETE', `/reserved_addrs/${first.body.id}`);
      const again = await small.call('POST', '/reserved_addrs', {});
      expect(again.status).toBe(201);
      expect(again.body.addr).toBe('tcp.burrow.test:20000');
    } finally {
      await small.close();
    }
  });

  it('gives concurrent creates distinct ports', async () => {
    const concurrent = await createTestApi(kind, {
      settings: { tcpPorts: { first: 30000, last: 30009 } },
    });
    try {
      const replies = await Promise.all(
        Array.from({ length: 8 }, () => concurrent.call('POST', '/reserved_addrs', {})),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(8).fill(201));
      const ports = replies.map((r) => Number(r.body.addr.split(':')[1])).sort((a, b) => a - b);
      expect(ports).toEqual([30000, 30001, 30002, 30003, 30004, 30005, 30006, 30007]);
    } finally {
      await concurrent.close();
    }
  });

  it('pages newest first with limit=2', async () => {
    const all = (await api.call('GET', '/reserved_addrs')).body.reserved_addrs;
    const first = await api.call('GET', '/reserved_addrs?limit=2');
    expect(first.body.reserved_addrs).toEqual(all.slice(0, 2));
    expect(first.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/reserved_addrs?before_id=${all[1].id}&limit=2`,
    );
    const second = await api.call('GET', first.body.next_page_uri.slice(TEST_BASE_URL.length));
    expect(second.body.reserved_addrs).toEqual(all.slice(2, 4));
    const ids = all.map((a: { id: string }) => a.id);
    expect(ids).toEqual([...ids].sort().reverse());
  });
});
