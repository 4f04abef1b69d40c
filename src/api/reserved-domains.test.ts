import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CA_MESSAGE } from '../store/reserved-domains.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

describe.each(DATABASE_KINDS)('reserved domains API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  /** Simulate an edge using `targetId` as a hostport, as the edge code will record it. */
  async function attachToEdge(edgeId: string, hostport: string, targetId: string): Promise<void> {
    await api.store.db
      .insertInto('edges')
      .values({
        id: edgeId,
        created_at: '2025-01-01T00:00:00Z',
        type: 'tls',
        description: '',
        metadata: '',
      })
      .execute();
    await api.store.db
      .insertInto('edge_hostports')
      .values({ hostport, edge_id: edgeId, target_id: targetId })
      .execute();
  }

  it('reserves a custom wildcard domain with both CNAME targets, as in the device-agent walkthrough', async () => {
    const res = await api.call('POST', '/reserved_domains', {
      domain: '*.SiteA.Example.com',
      region: 'us',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^rd_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/reserved_domains/${res.body.id}`,
      created_at: expect.stringMatching(RFC3339),
      description: '',
      metadata: '',
      domain: '*.sitea.example.com',
      region: '',
      cname_target: expect.stringMatching(/^[a-z0-9]{13}\.cname\.burrow\.test$/),
      certificate: null,
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'ecdsa' },
      certificate_management_status: {
        renews_at: null,
        provisioning_job: {
          error_code: 'ACME_NOT_CONFIGURED',
          msg: LOCAL_CA_MESSAGE,
          started_at: res.body.created_at,
          retries_at: null,
        },
      },
      acme_challenge_cname_target: expect.stringMatching(
        /^[a-z0-9]{8}\.acme-challenge\.burrow\.test$/,
      ),
      http_endpoint_configuration: null,
      https_endpoint_configuration: null,
    });
    expect(res.body.certificate_management_status.provisioning_job.msg).toContain('ca.pem');
  });

  it('gives a custom non-wildcard domain a cname target but no ACME challenge target', async () => {
    const res = await api.call('POST', '/reserved_domains', {
      domain: 'app.example.org',
      description: 'the app',
      metadata: '{"team":"web"}',
      certificate_management_policy: { private_key_type: 'rsa' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      domain: 'app.example.org',
      description: 'the app',
      metadata: '{"team":"web"}',
      cname_target: expect.stringMatching(/^[a-z0-9]{13}\.cname\.burrow\.test$/),
      acme_challenge_cname_target: null,
      certificate_management_policy: { authority: 'letsencrypt', private_key_type: 'rsa' },
    });
    const other = await api.call('POST', '/reserved_domains', { domain: 'app2.example.org' });
    expect(other.body.cname_target).not.toBe(res.body.cname_target);
  });

  it('gives names under the base domain no targets, policy or status', async () => {
    for (const domain of ['myapp.burrow.test', '*.team.burrow.test']) {
      const res = await api.call('POST', '/reserved_domains', { domain });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        domain,
        cname_target: null,
        acme_challenge_cname_target: null,
        certificate_management_policy: null,
        certificate_management_status: null,
      });
    }
    const withPolicy = await api.call('POST', '/reserved_domains', {
      domain: 'other.burrow.test',
      certificate_management_policy: { authority: 'letsencrypt' },
    });
    expect(withPolicy.status).toBe(400);
    expect(withPolicy.body).toMatchObject({
      error_code: 'ERR_NGROK_439',
      details: { field: 'certificate_management_policy' },
    });
    const base = await api.call('POST', '/reserved_domains', { domain: 'burrow.test' });
    expect(base.status).toBe(400);
    expect(base.body.error_code).toBe('ERR_NGROK_400');
    expect(base.body.msg).toContain("server's base domain");
  });

  it.each([
    ['a.*.b.com', 'ERR_NGROK_402', "'*' may only be the whole first label"],
    ['a*.example.com', 'ERR_NGROK_402', "'*' may only be the whole first label"],
    ['*.com', 'ERR_NGROK_400', "at least two labels after '*.'"],
    ['localhost', 'ERR_NGROK_400', 'at least two labels'],
    ['-bad.example.com', 'ERR_NGROK_400', "the label '-bad'"],
    ['bad_.example.com', 'ERR_NGROK_400', "the label 'bad_'"],
    ['a..example.com', 'ERR_NGROK_400', "the label ''"],
    [`${'a'.repeat(64)}.example.com`, 'ERR_NGROK_400', 'longer than 63 characters'],
    [`${'abcdefghi.'.repeat(25)}example.com`, 'ERR_NGROK_400', 'at most 253 characters'],
    ['', 'ERR_NGROK_400', 'must not be empty'],
  ])('refuses the invalid name %j with %s', async (domain, code, rule) => {
    const res = await api.call('POST', '/reserved_domains', { domain });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error_code: code, details: { field: 'domain' } });
    expect(res.body.msg).toContain('domain');
    expect(res.body.msg).toContain(rule);
  });

  it('refuses a missing domain, unknown fields and a changed domain in PATCH', async () => {
    const missing = await api.call('POST', '/reserved_domains', { region: 'us' });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error_code: 'ERR_NGROK_215', msg: 'domain: is required' });
    const unknown = await api.call('POST', '/reserved_domains', {
      domain: 'x.example.net',
      certificate_management_policy: { authority: 'letsencrypt', bits: 4096 },
    });
    expect(unknown.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'certificate_management_policy.bits' },
    });
    const { body: rd } = await api.call('POST', '/reserved_domains', {
      domain: 'fixed.example.net',
    });
    const rename = await api.call('PATCH', `/reserved_domains/${rd.id}`, {
      domain: 'new.example.net',
    });
    expect(rename.status).toBe(400);
    expect(rename.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'domain' },
    });
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).body.domain).toBe(
      'fixed.example.net',
    );
  });

  it('refuses a duplicate, whatever its case, naming the existing reservation', async () => {
    const { body: first } = await api.call('POST', '/reserved_domains', {
      domain: 'dup.example.com',
    });
    const dup = await api.call('POST', '/reserved_domains', { domain: 'DUP.example.com.' });
    expect(dup.status).toBe(409);
    expect(dup.body.error_code).toBe('ERR_NGROK_413');
    expect(dup.body.msg).toContain(first.id);
  });

  it('refuses bad certificate policy values with ERR_NGROK_420 naming the field', async () => {
    const authority = await api.call('POST', '/reserved_domains', {
      domain: 'policy.example.com',
      certificate_management_policy: { authority: 'zerossl' },
    });
    expect(authority.status).toBe(400);
    expect(authority.body).toMatchObject({
      error_code: 'ERR_NGROK_420',
      details: { field: 'certificate_management_policy.authority' },
    });
    expect(authority.body.msg).toContain("'letsencrypt'");
    const keyType = await api.call('POST', '/reserved_domains', {
      domain: 'policy.example.com',
      certificate_management_policy: { private_key_type: 'dsa' },
    });
    expect(keyType.body).toMatchObject({
      error_code: 'ERR_NGROK_420',
      details: { field: 'certificate_management_policy.private_key_type' },
    });
    expect(keyType.body.msg).toContain("'ecdsa' or 'rsa'");
    const wrongType = await api.call('POST', '/reserved_domains', {
      domain: 'policy.example.com',
      certificate_management_policy: 'letsencrypt',
    });
    expect(wrongType.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'certificate_management_policy: must be an object',
    });
    // Nothing was half-created by the refusals.
    const ok = await api.call('POST', '/reserved_domains', { domain: 'policy.example.com' });
    expect(ok.status).toBe(201);
  });

  it('gets, updates (only the fields sent), lists and deletes', async () => {
    const { body: rd } = await api.call('POST', '/reserved_domains', {
      domain: 'life.example.com',
      description: 'before',
    });
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).body).toEqual(rd);
    const patched = await api.call('PATCH', `/reserved_domains/${rd.id}`, { metadata: 'm' });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...rd, metadata: 'm' });
    const empty = await api.call('PATCH', `/reserved_domains/${rd.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(patched.body);
    const rsa = await api.call('PATCH', `/reserved_domains/${rd.id}`, {
      certificate_management_policy: { private_key_type: 'rsa' },
    });
    expect(rsa.body.certificate_management_policy).toEqual({
      authority: 'letsencrypt',
      private_key_type: 'rsa',
    });
    expect(rsa.body.certificate_management_status.provisioning_job.msg).toBe(LOCAL_CA_MESSAGE);
    const tooLong = await api.call('PATCH', `/reserved_domains/${rd.id}`, {
      description: 'é'.repeat(128),
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.details.field).toBe('description');
    const list = await api.call('GET', '/reserved_domains');
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/reserved_domains`);
    expect(list.body.reserved_domains.find((d: { id: string }) => d.id === rd.id)).toEqual(
      rsa.body,
    );
    const del = await api.call('DELETE', `/reserved_domains/${rd.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).status).toBe(404);
    expect((await api.call('PATCH', `/reserved_domains/${rd.id}`, {})).status).toBe(404);
    const again = await api.call('DELETE', `/reserved_domains/${rd.id}`);
    expect(again.status).toBe(404);
    expect(again.body.msg).toBe('Resource not found');
  });

  it('pages newest first with limit=2', async () => {
    const paged = await createTestApi(kind);
    try {
      const ids: string[] = [];
      for (const n of [1, 2, 3])
        ids.push(
          (await paged.call('POST', '/reserved_domains', { domain: `p${n}.example.com` })).body.id,
        );
      const first = await paged.call('GET', '/reserved_domains?limit=2');
      expect(first.body.reserved_domains.map((d: { id: string }) => d.id)).toEqual([
        ids[2],
        ids[1],
      ]);
      expect(first.body.next_page_uri).toBe(
        `${TEST_BASE_URL}/reserved_domains?before_id=${ids[1]}&limit=2`,
      );
      const second = await paged.call('GET', first.body.next_page_uri.slice(TEST_BASE_URL.length));
      expect(second.body.reserved_domains.map((d: { id: string }) => d.id)).toEqual([ids[0]]);
      expect(second.body.next_page_uri).toBeNull();
    } finally {
      await paged.close();
    }
  });

  it('detaches the certificate management policy, then can attach one again', async () => {
    const { body: rd } = await api.call('POST', '/reserved_domains', {
      domain: 'cert.example.com',
    });
    const del = await api.call(
      'DELETE',
      `/reserved_domains/${rd.id}/certificate_management_policy`,
    );
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    const after = (await api.call('GET', `/reserved_domains/${rd.id}`)).body;
    expect(after.certificate_management_policy).toBeNull();
    expect(after.certificate_management_status).toBeNull();
    expect(after.cname_target).toBe(rd.cname_target);
    expect(
      (await api.call('DELETE', `/reserved_domains/${rd.id}/certificate_management_policy`)).status,
    ).toBe(204);
    const reattached = await api.call('PATCH', `/reserved_domains/${rd.id}`, {
      certificate_management_policy: {},
    });
    expect(reattached.body.certificate_management_policy).toEqual({
      authority: 'letsencrypt',
      private_key_type: 'ecdsa',
    });
    expect(reattached.body.certificate_management_status.provisioning_job).toMatchObject({
      msg: LOCAL_CA_MESSAGE,
      started_at: expect.stringMatching(RFC3339),
    });
    const missing = 'rd_00000000000000000000000000';
    expect(
      (await api.call('DELETE', `/reserved_domains/${missing}/certificate_management_policy`))
        .status,
    ).toBe(404);
  });

  it('refuses a policy PATCH on a name under the base domain', async () => {
    const { body: rd } = await api.call('POST', '/reserved_domains', { domain: 'own.burrow.test' });
    const res = await api.call('PATCH', `/reserved_domains/${rd.id}`, {
      certificate_management_policy: { authority: 'letsencrypt' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error_code).toBe('ERR_NGROK_439');
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).body).toEqual(rd);
  });

  it('answers DELETE certificate with 204 (nothing is ever attached) and 404 for unknown ids', async () => {
    const { body: rd } = await api.call('POST', '/reserved_domains', {
      domain: 'nocert.example.com',
    });
    expect((await api.call('DELETE', `/reserved_domains/${rd.id}/certificate`)).status).toBe(204);
    expect((await api.call('DELETE', `/reserved_domains/${rd.id}/certificate`)).status).toBe(204);
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).body).toEqual(rd);
    const missing = await api.call(
      'DELETE',
      '/reserved_domains/rd_00000000000000000000000000/certificate',
    );
    expect(missing.status).toBe(404);
    expect(missing.body.msg).toBe('Resource not found');
  });

  it('refuses to delete a domain that is a TLS edge hostport, naming the edge', async () => {
    const { body: rd } = await api.call('POST', '/reserved_domains', {
      domain: 'edge.example.com',
    });
    const edgeId = 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52';
    await attachToEdge(edgeId, 'edge.example.com:443', rd.id);
    const res = await api.call('DELETE', `/reserved_domains/${rd.id}`);
    expect(res.status).toBe(409);
    expect(res.body.error_code).toBe('ERR_NGROK_446');
    expect(res.body.msg).toContain(edgeId);
    expect(res.body.msg).toContain('edge.example.com');
    expect((await api.call('GET', `/reserved_domains/${rd.id}`)).status).toBe(200);
    await api.store.db.deleteFrom('edges').where('id', '=', edgeId).execute();
    expect((await api.call('DELETE', `/reserved_domains/${rd.id}`)).status).toBe(204);
  });

  it('describes the routes in the OpenAPI document', async () => {
    const doc = await api.call('GET', '/openapi.json');
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/reserved_domains',
        '/reserved_domains/{id}',
        '/reserved_domains/{id}/certificate_management_policy',
        '/reserved_domains/{id}/certificate',
      ]),
    );
  });
});
