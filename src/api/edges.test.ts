import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { edgeFixtures, type EdgeFixtures } from '../../test/support/edge-fixtures.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe.each(DATABASE_KINDS)('TCP and TLS edges (%s)', (kind) => {
  let api: TestApi;
  let fx: EdgeFixtures;
  beforeAll(async () => {
    api = await createTestApi(kind);
    fx = edgeFixtures(api.store);
  });
  afterAll(async () => api.close());

  describe('TCP edge CRUD', () => {
    it('creates an edge as in the reference sample: every module null, policy null', async () => {
      const res = await api.call('POST', '/edges/tcp', {
        description: 'acme tcp edge',
        metadata: '{"environment": "staging"}',
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^edgtcp_[0-9A-Za-z]{27}$/),
        uri: `${TEST_BASE_URL}/edges/tcp/${res.body.id}`,
        description: 'acme tcp edge',
        metadata: '{"environment": "staging"}',
        created_at: expect.stringMatching(RFC3339),
        hostports: null,
        backend: null,
        ip_restriction: null,
        traffic_policy: null,
        policy: null,
      });
    });

    it('creates with no body at all, gets, lists, updates and deletes', async () => {
      const created = await api.call('POST', '/edges/tcp');
      expect(created.status).toBe(201);
      expect(created.body.description).toBe('');
      const id = created.body.id;
      expect((await api.call('GET', `/edges/tcp/${id}`)).body).toEqual(created.body);

      const list = await api.call('GET', '/edges/tcp');
      expect(list.status).toBe(200);
      expect(list.body.uri).toBe(`${TEST_BASE_URL}/edges/tcp`);
      expect(list.body.tcp_edges.map((e: { id: string }) => e.id)).toContain(id);

      const addr = await fx.reservedAddr();
      const patched = await api.call('PATCH', `/edges/tcp/${id}`, {
        description: 'renamed',
        hostports: [addr.addr],
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toEqual({
        ...created.body,
        description: 'renamed',
        hostports: [addr.addr],
      });
      expect(await fx.hostportRows(id)).toEqual([{ hostport: addr.addr, target_id: addr.id }]);
      expect(await fx.refsOf(id)).toEqual([addr.id]);

      const empty = await api.call('PATCH', `/edges/tcp/${id}`, {});
      expect(empty.status).toBe(200);
      expect(empty.body).toEqual(patched.body);

      const del = await api.call('DELETE', `/edges/tcp/${id}`);
      expect(del.status).toBe(204);
      expect(del.body).toBeUndefined();
      expect(await fx.hostportRows(id)).toEqual([]);
      expect(await fx.refsOf(id)).toEqual([]);
      const gone = await api.call('GET', `/edges/tcp/${id}`);
      expect(gone.status).toBe(404);
      expect(gone.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });
      expect((await api.call('DELETE', `/edges/tcp/${id}`)).status).toBe(404);
      expect((await api.call('PATCH', `/edges/tcp/${id}`, { description: 'x' })).status).toBe(404);
    });

    it('does not serve a TLS edge under /edges/tcp, nor the reverse', async () => {
      const tls = await api.call('POST', '/edges/tls', {});
      const tcp = await api.call('POST', '/edges/tcp', {});
      expect((await api.call('GET', `/edges/tcp/${tls.body.id}`)).status).toBe(404);
      expect((await api.call('DELETE', `/edges/tcp/${tls.body.id}`)).status).toBe(404);
      expect((await api.call('GET', `/edges/tls/${tcp.body.id}`)).status).toBe(404);
      expect((await api.call('PATCH', `/edges/tls/${tcp.body.id}`, {})).status).toBe(404);
      expect((await api.call('GET', `/edges/tls/${tls.body.id}`)).status).toBe(200);
    });

    it('clears hostports with an empty list or null, returned as null', async () => {
      const a = await fx.reservedAddr();
      const b = await fx.reservedAddr();
      const { body: edge } = await api.call('POST', '/edges/tcp', { hostports: [a.addr, b.addr] });
      expect(edge.hostports).toEqual([a.addr, b.addr]);
      expect(await fx.refsOf(edge.id)).toEqual([a.id, b.id].sort());
      const cleared = await api.call('PATCH', `/edges/tcp/${edge.id}`, { hostports: [] });
      expect(cleared.body.hostports).toBeNull();
      expect(await fx.hostportRows(edge.id)).toEqual([]);
      expect(await fx.refsOf(edge.id)).toEqual([]);
      await api.call('PATCH', `/edges/tcp/${edge.id}`, { hostports: [b.addr] });
      const nulled = await api.call('PATCH', `/edges/tcp/${edge.id}`, { hostports: null });
      expect(nulled.status).toBe(200);
      expect(nulled.body.hostports).toBeNull();
    });

    it('refuses unknown fields with ERR_NGROK_214, also inside modules and TLS-only modules', async () => {
      const top = await api.call('POST', '/edges/tcp', { name: 'x' });
      expect(top.status).toBe(400);
      expect(top.body).toMatchObject({ error_code: 'ERR_NGROK_214', details: { field: 'name' } });
      const tlsOnly = await api.call('POST', '/edges/tcp', {
        tls_termination: { terminate_at: 'edge' },
      });
      expect(tlsOnly.body).toMatchObject({
        error_code: 'ERR_NGROK_214',
        details: { field: 'tls_termination' },
      });
      const nested = await api.call('POST', '/edges/tcp', {
        backend: { backend_id: 'bkdtg_x', weight: 1 },
      });
      expect(nested.body).toMatchObject({
        error_code: 'ERR_NGROK_214',
        details: { field: 'backend.weight' },
      });
    });
  });

  describe('description and metadata limits', () => {
    it('accepts 255 bytes of description and refuses 256 bytes of multi-byte UTF-8 (7073)', async () => {
      const ok = await api.call('POST', '/edges/tcp', { description: 'é'.repeat(127) + 'a' });
      expect(ok.status).toBe(201);
      const tooLong = await api.call('POST', '/edges/tcp', { description: 'é'.repeat(128) });
      expect(tooLong.status).toBe(400);
      expect(tooLong.body).toMatchObject({
        error_code: 'ERR_NGROK_7073',
        details: { field: 'description' },
      });
      expect(tooLong.body.msg).toContain('255 bytes');
      const patch = await api.call('PATCH', `/edges/tcp/${ok.body.id}`, {
        description: 'é'.repeat(128),
      });
      expect(patch.status).toBe(400);
      expect(patch.body.error_code).toBe('ERR_NGROK_7073');
    });

    it('accepts 4096 bytes of metadata and refuses 4097', async () => {
      const ok = await api.call('POST', '/edges/tls', { metadata: 'm'.repeat(4096) });
      expect(ok.status).toBe(201);
      const tooLong = await api.call('POST', '/edges/tls', { metadata: 'é'.repeat(2048) + 'm' });
      expect(tooLong.status).toBe(400);
      expect(tooLong.body.details.field).toBe('metadata');
      expect(tooLong.body.msg).toContain('4096 bytes');
    });
  });

  describe('TCP hostports', () => {
    it('refuses malformed hostports (7104) and ports out of range (7112), naming the index', async () => {
      const a = await fx.reservedAddr();
      for (const bad of ['no-port', 'host:', ':20000', 'a b:1', 'host:port', 'h:1:2']) {
        const res = await api.call('POST', '/edges/tcp', { hostports: [a.addr, bad] });
        expect(res.status, bad).toBe(400);
        expect(res.body, bad).toMatchObject({
          error_code: 'ERR_NGROK_7104',
          details: { field: 'hostports[1]' },
        });
      }
      for (const bad of ['tcp.burrow.test:0', 'tcp.burrow.test:65536']) {
        const res = await api.call('POST', '/edges/tcp', { hostports: [bad] });
        expect(res.body, bad).toMatchObject({
          error_code: 'ERR_NGROK_7112',
          details: { field: 'hostports[0]' },
        });
      }
    });

    it('refuses an address that is not reserved (7113) and a reserved domain (7120)', async () => {
      const notReserved = await api.call('POST', '/edges/tcp', {
        hostports: ['tcp.burrow.test:20999'],
      });
      expect(notReserved.status).toBe(400);
      expect(notReserved.body).toMatchObject({
        error_code: 'ERR_NGROK_7113',
        details: { field: 'hostports[0]' },
      });
      expect(notReserved.body.msg).toContain('/reserved_addrs');
      const d = await fx.reservedDomain('tcp-edge-test.example.com');
      const domain = await api.call('POST', '/edges/tcp', { hostports: [`${d.domain}:8443`] });
      expect(domain.body).toMatchObject({
        error_code: 'ERR_NGROK_7120',
        details: { field: 'hostports[0]' },
      });
    });

    it('refuses the same hostport twice in one list', async () => {
      const a = await fx.reservedAddr();
      const res = await api.call('POST', '/edges/tcp', { hostports: [a.addr, a.addr] });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'hostports[1]' },
      });
    });

    it('gives a hostport to one edge only (409 7122 naming it) until it is PATCHed away', async () => {
      const a = await fx.reservedAddr();
      const b = await fx.reservedAddr();
      const first = await api.call('POST', '/edges/tcp', { hostports: [a.addr] });
      const second = await api.call('POST', '/edges/tcp', { hostports: [b.addr] });
      const clash = await api.call('POST', '/edges/tcp', { hostports: [a.addr] });
      expect(clash.status).toBe(409);
      expect(clash.body.error_code).toBe('ERR_NGROK_7122');
      expect(clash.body.msg).toContain(first.body.id);
      const patchClash = await api.call('PATCH', `/edges/tcp/${second.body.id}`, {
        description: 'must not be saved',
        hostports: [b.addr, a.addr],
      });
      expect(patchClash.status).toBe(409);
      expect(patchClash.body.msg).toContain(first.body.id);
      const unchanged = await api.call('GET', `/edges/tcp/${second.body.id}`);
      expect(unchanged.body).toEqual(second.body);

      // Re-sending an edge's own hostports is no conflict.
      expect(
        (await api.call('PATCH', `/edges/tcp/${first.body.id}`, { hostports: [a.addr] })).status,
      ).toBe(200);
      await api.call('PATCH', `/edges/tcp/${first.body.id}`, { hostports: [] });
      const moved = await api.call('PATCH', `/edges/tcp/${second.body.id}`, {
        hostports: [b.addr, a.addr],
      });
      expect(moved.status).toBe(200);
      expect(moved.body.hostports).toEqual([b.addr, a.addr]);
      expect((await fx.hostportRows(second.body.id)).map((r) => r.hostport).sort()).toEqual(
        [a.addr, b.addr].sort(),
      );
    });

    it('frees a deleted edge’s hostports for another edge', async () => {
      const a = await fx.reservedAddr();
      const first = await api.call('POST', '/edges/tcp', { hostports: [a.addr] });
      await api.call('DELETE', `/edges/tcp/${first.body.id}`);
      expect((await api.call('POST', '/edges/tcp', { hostports: [a.addr] })).status).toBe(201);
    });
  });

  describe('TLS edges and hostports', () => {
    it('creates a TLS edge with all five modules null and a reserved domain on the TLS port', async () => {
      const d = await fx.reservedDomain('tls-crud.example.com');
      const res = await api.call('POST', '/edges/tls', {
        description: 'acme tls edge',
        hostports: [`${d.domain}:8443`],
        metadata: '{"environment": "staging"}',
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^edgtls_[0-9A-Za-z]{27}$/),
        uri: `${TEST_BASE_URL}/edges/tls/${res.body.id}`,
        description: 'acme tls edge',
        metadata: '{"environment": "staging"}',
        created_at: expect.stringMatching(RFC3339),
        hostports: [`${d.domain}:8443`],
        backend: null,
        ip_restriction: null,
        mutual_tls: null,
        tls_termination: null,
        traffic_policy: null,
        policy: null,
      });
      expect(await fx.hostportRows(res.body.id)).toEqual([
        { hostport: `${d.domain}:8443`, target_id: d.id },
      ]);
      const list = await api.call('GET', '/edges/tls');
      expect(list.body.tls_edges[0]).toEqual(res.body);
      expect(list.body).not.toHaveProperty('tcp_edges');
      expect((await api.call('DELETE', `/edges/tls/${res.body.id}`)).status).toBe(204);
      expect(await fx.hostportRows(res.body.id)).toEqual([]);
    });

    it('accepts a wildcard exactly as reserved, and not a name under it', async () => {
      await fx.reservedDomain('*.sitea.example.com');
      const ok = await api.call('POST', '/edges/tls', { hostports: ['*.sitea.example.com:8443'] });
      expect(ok.status).toBe(201);
      const under = await api.call('POST', '/edges/tls', {
        hostports: ['dev1.sitea.example.com:8443'],
      });
      expect(under.status).toBe(400);
      expect(under.body.error_code).toBe('ERR_NGROK_7117');
    });

    it('refuses each kind of bad TLS hostport, naming the field', async () => {
      const d = await fx.reservedDomain('tls-bad.example.com');
      const addr = await fx.reservedAddr();
      const before = (await api.call('GET', '/edges/tls')).body.tls_edges.length;
      const cases: Array<[string, string]> = [
        ['not-a-hostport', 'ERR_NGROK_7104'],
        [`${d.domain}:99999`, 'ERR_NGROK_7112'],
        ['unreserved.example.com:8443', 'ERR_NGROK_7117'],
        [`${d.domain}:443`, 'ERR_NGROK_7116'],
        [addr.addr, 'ERR_NGROK_7133'],
      ];
      for (const [hostport, code] of cases) {
        const res = await api.call('POST', '/edges/tls', {
          hostports: [`${d.domain}:8443`, hostport],
        });
        expect(res.status, hostport).toBe(400);
        expect(res.body, hostport).toMatchObject({
          error_code: code,
          details: { field: 'hostports[1]' },
        });
      }
      const wrongPort = await api.call('POST', '/edges/tls', { hostports: [`${d.domain}:443`] });
      expect(wrongPort.body.msg).toContain('8443');
      // The refused creates left nothing behind.
      expect((await api.call('GET', '/edges/tls')).body.tls_edges.length).toBe(before);
      const ok = await api.call('POST', '/edges/tls', { hostports: [`${d.domain}:8443`] });
      expect(ok.status).toBe(201);
    });
  });

  describe('paging', () => {
    it('pages 250 TCP edges by 100: 3 pages, newest first, no duplicates', async () => {
      const fresh = await createTestApi(kind);
      try {
        const ids: string[] = [];
        for (let i = 0; i < 250; i++) {
          const res = await fresh.call('POST', '/edges/tcp', { description: `edge ${i}` });
          expect(res.status).toBe(201);
          ids.push(res.body.id);
        }
        const seen: string[] = [];
        let url: string | null = '/edges/tcp?limit=100';
        const sizes: number[] = [];
        while (url !== null) {
          const page = await fresh.call('GET', url.replace(TEST_BASE_URL, ''));
          expect(page.status).toBe(200);
          sizes.push(page.body.tcp_edges.length);
          seen.push(...page.body.tcp_edges.map((e: { id: string }) => e.id));
          const next: string | null = page.body.next_page_uri;
          if (next !== null) expect(next.startsWith(`${TEST_BASE_URL}/edges/tcp?`)).toBe(true);
          url = next;
        }
        expect(sizes).toEqual([100, 100, 50]);
        expect(new Set(seen).size).toBe(250);
        expect(seen).toEqual([...ids].reverse());
      } finally {
        await fresh.close();
      }
    }, 60_000);
  });
});
