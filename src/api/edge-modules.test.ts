import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findReferrer } from '../store/refs.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { edgeFixtures, type EdgeFixtures } from '../../test/support/edge-fixtures.js';
import { TLS_SAMPLE_POLICY as TLS_SAMPLE_POLICY_COMPACT } from '../../test/support/policy-fixtures.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

/** The TLS-edge policy sample of docs/api/edges.md, pretty-printed as a client might send it. */
const TLS_SAMPLE_POLICY = JSON.stringify(JSON.parse(TLS_SAMPLE_POLICY_COMPACT), null, 2);

const BLOCK_IP_POLICY =
  '{"inbound":[{"name":"Block IP","expressions":["conn.client_ip == \'192.0.2.0\'"],"actions":[{"type":"deny"}]}]}';

const ref = (id: string, collection: string) => ({
  id,
  uri: `${TEST_BASE_URL}/${collection}/${id}`,
});

describe.each(DATABASE_KINDS)('edge modules (%s)', (kind) => {
  let api: TestApi;
  let fx: EdgeFixtures;
  beforeAll(async () => {
    api = await createTestApi(kind);
    fx = edgeFixtures(api.store);
  });
  afterAll(async () => api.close());

  const newEdge = async (type: 'tcp' | 'tls', body: unknown = {}) => {
    const res = await api.call('POST', `/edges/${type}`, body);
    expect(res.status).toBe(201);
    return res.body as { id: string; [k: string]: unknown };
  };

  describe('module paths', () => {
    it('PUTs, GETs and DELETEs each TCP module', async () => {
      const edge = await newEdge('tcp');
      const backend = await fx.backend();
      const ipp = await fx.ipPolicy();
      const cases = [
        {
          name: 'backend',
          put: { backend_id: backend },
          reply: { enabled: true, backend: ref(backend, 'backends/tunnel_group') },
        },
        {
          name: 'ip_restriction',
          put: { enabled: false, ip_policy_ids: [ipp] },
          reply: { enabled: false, ip_policies: [ref(ipp, 'ip_policies')] },
        },
        {
          name: 'traffic_policy',
          put: { value: BLOCK_IP_POLICY },
          reply: { enabled: true, value: BLOCK_IP_POLICY },
        },
      ];
      for (const c of cases) {
        const path = `/edges/tcp/${edge.id}/${c.name}`;
        const unset = await api.call('GET', path);
        expect(unset.status, c.name).toBe(404);
        expect(unset.body.msg).toContain(`${c.name} module is not set`);
        const put = await api.call('PUT', path, c.put);
        expect(put.status, c.name).toBe(200);
        expect(put.body).toEqual(c.reply);
        expect((await api.call('GET', path)).body).toEqual(c.reply);
        expect((await api.call('GET', `/edges/tcp/${edge.id}`)).body[c.name]).toEqual(c.reply);
      }
      expect(await fx.refsOf(edge.id)).toEqual([backend, ipp].sort());
      for (const c of cases) {
        const path = `/edges/tcp/${edge.id}/${c.name}`;
        const del = await api.call('DELETE', path);
        expect(del.status).toBe(204);
        expect(del.body).toBeUndefined();
        expect((await api.call('GET', path)).status).toBe(404);
        expect((await api.call('DELETE', path)).status).toBe(204);
        expect((await api.call('GET', `/edges/tcp/${edge.id}`)).body[c.name]).toBeNull();
      }
      expect(await fx.refsOf(edge.id)).toEqual([]);
    });

    it('PUTs, GETs and DELETEs each TLS module', async () => {
      const edge = await newEdge('tls');
      const backend = await fx.backend();
      const ipp = await fx.ipPolicy();
      const ca = await fx.certificateAuthority();
      const cases = [
        {
          name: 'backend',
          put: { enabled: true, backend_id: backend },
          reply: { enabled: true, backend: ref(backend, 'backends/tunnel_group') },
        },
        {
          name: 'ip_restriction',
          put: { ip_policy_ids: [ipp] },
          reply: { enabled: true, ip_policies: [ref(ipp, 'ip_policies')] },
        },
        {
          name: 'tls_termination',
          put: { terminate_at: 'edge', min_version: '1.3' },
          reply: { enabled: true, terminate_at: 'edge', min_version: '1.3' },
        },
        {
          name: 'mutual_tls',
          put: { certificate_authority_ids: [ca] },
          reply: { enabled: true, certificate_authorities: [ref(ca, 'certificate_authorities')] },
        },
        {
          name: 'traffic_policy',
          put: { enabled: false, value: TLS_SAMPLE_POLICY },
          reply: { enabled: false, value: TLS_SAMPLE_POLICY },
        },
      ];
      for (const c of cases) {
        const path = `/edges/tls/${edge.id}/${c.name}`;
        expect((await api.call('GET', path)).status, c.name).toBe(404);
        const put = await api.call('PUT', path, c.put);
        expect(put.status, c.name).toBe(200);
        expect(put.body).toEqual(c.reply);
        expect((await api.call('GET', path)).body).toEqual(c.reply);
      }
      const full = await api.call('GET', `/edges/tls/${edge.id}`);
      for (const c of cases) expect(full.body[c.name]).toEqual(c.reply);
      expect(await fx.refsOf(edge.id)).toEqual([backend, ipp, ca].sort());
      // mutual_tls depends on tls_termination, so remove it first.
      for (const name of ['mutual_tls', 'tls_termination', 'backend', 'ip_restriction']) {
        expect((await api.call('DELETE', `/edges/tls/${edge.id}/${name}`)).status).toBe(204);
        expect((await api.call('GET', `/edges/tls/${edge.id}/${name}`)).status).toBe(404);
      }
      expect(await fx.refsOf(edge.id)).toEqual([]);
    });

    it('round-trips the reference TLS traffic policy sample exactly', async () => {
      const edge = await newEdge('tls');
      const path = `/edges/tls/${edge.id}/traffic_policy`;
      const put = await api.call('PUT', path, { value: TLS_SAMPLE_POLICY });
      expect(put.status).toBe(200);
      expect(put.body).toEqual({ enabled: true, value: TLS_SAMPLE_POLICY });
      const get = await api.call('GET', path);
      expect(get.status).toBe(200);
      expect(get.body.value).toBe(TLS_SAMPLE_POLICY);
      expect(JSON.parse(get.body.value).inbound[0].name).toBe('AllowTLS1.3');
      expect((await api.call('DELETE', path)).status).toBe(204);
      expect((await api.call('GET', path)).status).toBe(404);
      expect((await api.call('GET', `/edges/tls/${edge.id}`)).body.traffic_policy).toBeNull();
    });

    it('answers 404 Resource not found for unknown edges and for the other edge type', async () => {
      const tcp = await newEdge('tcp');
      const backend = await fx.backend();
      for (const method of ['GET', 'DELETE']) {
        const res = await api.call(method, '/edges/tcp/edgtcp_000000000000000000000000000/backend');
        expect(res.status).toBe(404);
        expect(res.body.msg).toBe('Resource not found');
      }
      const put = await api.call('PUT', '/edges/tcp/edgtcp_000000000000000000000000000/backend', {
        backend_id: backend,
      });
      expect(put.status).toBe(404);
      expect((await api.call('GET', `/edges/tls/${tcp.id}/backend`)).status).toBe(404);
      expect((await api.call('PUT', `/edges/tcp/${tcp.id}/mutual_tls`, {})).status).toBe(404);
    });

    it('checks PUT bodies: unknown fields (214), missing fields (215), names body fields', async () => {
      const edge = await newEdge('tcp');
      const unknown = await api.call('PUT', `/edges/tcp/${edge.id}/backend`, {
        backend_id: 'x',
        extra: 1,
      });
      expect(unknown.body).toMatchObject({
        error_code: 'ERR_NGROK_214',
        details: { field: 'extra' },
      });
      const missing = await api.call('PUT', `/edges/tcp/${edge.id}/ip_restriction`, {});
      expect(missing.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'ip_policy_ids' },
      });
      const dangling = await api.call('PUT', `/edges/tcp/${edge.id}/ip_restriction`, {
        ip_policy_ids: ['ipp_000000000000000000000000000'],
      });
      expect(dangling.body).toMatchObject({
        error_code: 'ERR_NGROK_7007',
        details: { field: 'ip_policy_ids[0]' },
      });
    });
  });

  describe('modules in create and PATCH', () => {
    it('creates with modules, enabled defaulting to true, and records references', async () => {
      const backend = await fx.backend();
      const ipp = await fx.ipPolicy();
      const edge = await newEdge('tcp', {
        backend: { backend_id: backend },
        ip_restriction: { enabled: false, ip_policy_ids: [ipp] },
        traffic_policy: { value: BLOCK_IP_POLICY },
      });
      expect(edge.backend).toEqual({
        enabled: true,
        backend: ref(backend, 'backends/tunnel_group'),
      });
      expect(edge.ip_restriction).toEqual({
        enabled: false,
        ip_policies: [ref(ipp, 'ip_policies')],
      });
      expect(edge.traffic_policy).toEqual({ enabled: true, value: BLOCK_IP_POLICY });
      expect(await fx.refsOf(edge.id)).toEqual([backend, ipp].sort());
      expect(await findReferrer(api.store.db, backend)).toBe(edge.id);
      expect((await api.call('DELETE', `/edges/tcp/${edge.id}`)).status).toBe(204);
      expect(await findReferrer(api.store.db, backend)).toBeUndefined();
    });

    it('replaces a module given in PATCH whole and leaves the others alone', async () => {
      const backend = await fx.backend();
      const [p1, p2, p3] = [await fx.ipPolicy(), await fx.ipPolicy(), await fx.ipPolicy()];
      const edge = await newEdge('tcp', {
        backend: { backend_id: backend },
        ip_restriction: { enabled: false, ip_policy_ids: [p1, p2] },
      });
      const patched = await api.call('PATCH', `/edges/tcp/${edge.id}`, {
        ip_restriction: { ip_policy_ids: [p3] },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.ip_restriction).toEqual({
        enabled: true,
        ip_policies: [ref(p3, 'ip_policies')],
      });
      expect(patched.body.backend).toEqual(edge.backend);
      expect(await fx.refsOf(edge.id)).toEqual([backend, p3].sort());

      const described = await api.call('PATCH', `/edges/tcp/${edge.id}`, { description: 'd' });
      expect(described.body).toEqual({ ...patched.body, description: 'd' });
      expect(await fx.refsOf(edge.id)).toEqual([backend, p3].sort());
    });

    it('refuses a null module in PATCH with 7028 pointing at the module DELETE path', async () => {
      const backend = await fx.backend();
      const edge = await newEdge('tcp', { backend: { backend_id: backend } });
      const res = await api.call('PATCH', `/edges/tcp/${edge.id}`, {
        description: 'not saved',
        backend: null,
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_7028',
        details: { field: 'backend' },
      });
      expect(res.body.msg).toContain(`DELETE /edges/tcp/${edge.id}/backend`);
      expect((await api.call('GET', `/edges/tcp/${edge.id}`)).body).toEqual(edge);
      // On create, null simply means "no module".
      const created = await newEdge('tcp', { backend: null });
      expect(created.backend).toBeNull();
    });

    it('refuses dangling references, naming the field, and saves nothing', async () => {
      const ipp = await fx.ipPolicy();
      const before = (await api.call('GET', '/edges/tls')).body.tls_edges.length;
      const cases: Array<[unknown, string, string]> = [
        [
          { backend: { backend_id: 'bkdtg_000000000000000000000000000' } },
          'ERR_NGROK_6514',
          'backend.backend_id',
        ],
        [
          { ip_restriction: { ip_policy_ids: [ipp, 'ipp_000000000000000000000000000'] } },
          'ERR_NGROK_7007',
          'ip_restriction.ip_policy_ids[1]',
        ],
        [
          { ip_restriction: { ip_policy_ids: [] } },
          'ERR_NGROK_7025',
          'ip_restriction.ip_policy_ids',
        ],
        [
          { ip_restriction: { ip_policy_ids: [ipp, ipp] } },
          'ERR_NGROK_215',
          'ip_restriction.ip_policy_ids[1]',
        ],
        [
          {
            tls_termination: { terminate_at: 'edge' },
            mutual_tls: { certificate_authority_ids: ['ca_000000000000000000000000000'] },
          },
          'ERR_NGROK_7072',
          'mutual_tls.certificate_authority_ids[0]',
        ],
        [
          {
            tls_termination: { terminate_at: 'edge' },
            mutual_tls: { certificate_authority_ids: [] },
          },
          'ERR_NGROK_215',
          'mutual_tls.certificate_authority_ids',
        ],
      ];
      for (const [body, code, field] of cases) {
        const res = await api.call('POST', '/edges/tls', body);
        expect(res.status, field).toBe(400);
        expect(res.body, field).toMatchObject({ error_code: code, details: { field } });
      }
      expect((await api.call('GET', '/edges/tls')).body.tls_edges.length).toBe(before);
    });

    it('refuses a malformed traffic policy with ERR_NGROK_2236', async () => {
      const create = await api.call('POST', '/edges/tcp', {
        traffic_policy: { value: '{not json' },
      });
      expect(create.status).toBe(400);
      expect(create.body).toMatchObject({
        error_code: 'ERR_NGROK_2236',
        details: { field: 'traffic_policy.value' },
      });
      const edge = await newEdge('tls');
      const put = await api.call('PUT', `/edges/tls/${edge.id}/traffic_policy`, {
        value: '{not json',
      });
      expect(put.status).toBe(400);
      expect(put.body.error_code).toBe('ERR_NGROK_2236');
    });
  });

  describe('TLS termination and mutual TLS', () => {
    it('checks terminate_at (224) and min_version', async () => {
      const edge = await newEdge('tls');
      const path = `/edges/tls/${edge.id}/tls_termination`;
      const at = await api.call('PUT', path, { terminate_at: 'agent' });
      expect(at.body).toMatchObject({
        error_code: 'ERR_NGROK_224',
        details: { field: 'terminate_at' },
      });
      const min = await api.call('PUT', path, { terminate_at: 'edge', min_version: '1.4' });
      expect(min.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'min_version' },
      });
      const upstream = await api.call('PATCH', `/edges/tls/${edge.id}`, {
        tls_termination: { terminate_at: 'upstream', min_version: '1.2' },
      });
      expect(upstream.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        details: { field: 'tls_termination.min_version' },
      });
      const pass = await api.call('PUT', path, { terminate_at: 'upstream', min_version: null });
      expect(pass.body).toEqual({ enabled: true, terminate_at: 'upstream', min_version: null });
      const noMin = await api.call('PUT', path, { terminate_at: 'edge' });
      expect(noMin.body).toEqual({ enabled: true, terminate_at: 'edge', min_version: null });
    });

    it('requires tls_termination at the edge before mutual_tls (7062)', async () => {
      const ca = await fx.certificateAuthority();
      const edge = await newEdge('tls');
      const mtls = `/edges/tls/${edge.id}/mutual_tls`;
      const term = `/edges/tls/${edge.id}/tls_termination`;
      const alone = await api.call('PUT', mtls, { certificate_authority_ids: [ca] });
      expect(alone.status).toBe(400);
      expect(alone.body.error_code).toBe('ERR_NGROK_7062');
      expect(alone.body.msg).toContain('set tls_termination first');
      await api.call('PUT', term, { terminate_at: 'upstream' });
      expect(
        (await api.call('PUT', mtls, { certificate_authority_ids: [ca] })).body.error_code,
      ).toBe('ERR_NGROK_7062');
      await api.call('PUT', term, { terminate_at: 'edge' });
      expect((await api.call('PUT', mtls, { certificate_authority_ids: [ca] })).status).toBe(200);

      const toUpstream = await api.call('PUT', term, { terminate_at: 'upstream' });
      expect(toUpstream.status).toBe(400);
      expect(toUpstream.body).toMatchObject({
        error_code: 'ERR_NGROK_7062',
        details: { field: 'tls_termination' },
      });
      const removeTerm = await api.call('DELETE', term);
      expect(removeTerm.status).toBe(409);
      expect(removeTerm.body.error_code).toBe('ERR_NGROK_7062');
      expect((await api.call('GET', term)).body.terminate_at).toBe('edge');
      expect((await api.call('DELETE', mtls)).status).toBe(204);
      expect((await api.call('DELETE', term)).status).toBe(204);

      const together = await newEdge('tls', {
        tls_termination: { terminate_at: 'edge', min_version: '1.2' },
        mutual_tls: { certificate_authority_ids: [ca] },
      });
      expect(together.mutual_tls).toEqual({
        enabled: true,
        certificate_authorities: [ref(ca, 'certificate_authorities')],
      });
    });
  });

  describe('repository for the edge runtime', () => {
    it('lists every edge of a type with parsed modules, and gets one by id', async () => {
      const backend = await fx.backend();
      const d = await fx.reservedDomain('runtime.example.com');
      const edge = await newEdge('tls', {
        hostports: [`${d.domain}:8443`],
        backend: { backend_id: backend },
        tls_termination: { terminate_at: 'edge' },
      });
      const all = await api.repos.edges.listAll('tls');
      expect(all.every((e) => e.type === 'tls')).toBe(true);
      const mine = all.find((e) => e.id === edge.id);
      expect(mine).toMatchObject({
        hostports: [`${d.domain}:8443`],
        backend: { enabled: true, backend_id: backend },
        tls_termination: { enabled: true, terminate_at: 'edge', min_version: null },
        mutual_tls: null,
      });
      expect(await api.repos.edges.get(edge.id)).toEqual(mine);
      expect((await api.repos.edges.listAll('tcp')).some((e) => e.id === edge.id)).toBe(false);
    });
  });
});
