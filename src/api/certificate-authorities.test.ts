import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { CA_EXTENSIONS, certificateMaker } from '../../test/support/certificates.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { parseCaPem } from '../store/certificate-authorities.js';

const maker = certificateMaker();
// The CA of the brief's openssl command, one with usages, a second CA, and a leaf.
const testCa = maker.make('/CN=Test CA', CA_EXTENSIONS);
const testCaKey = maker.lastKey();
const usageCa = maker.make('/O=Acme/CN=Acme Client CA', [
  ...CA_EXTENSIONS,
  'keyUsage=critical,digitalSignature,keyCertSign,cRLSign',
  'extendedKeyUsage=clientAuth,serverAuth',
]);
const otherCa = maker.make('/CN=Other CA', CA_EXTENSIONS, { key: 'rsa' });
const leaf = maker.make('/CN=client.example', ['basicConstraints=critical,CA:FALSE']);
afterAll(() => maker.cleanup());

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

function rfc3339(date: string): string {
  return new Date(date).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

describe.each(DATABASE_KINDS)('certificate authorities API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  it('creates a CA from a real CA certificate and reports what it holds', async () => {
    const res = await api.call('POST', '/certificate_authorities', {
      ca_pem: testCa,
      description: 'client CA',
      metadata: '{"team":"ops"}',
    });
    expect(res.status).toBe(201);
    const x509 = new X509Certificate(testCa);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^ca_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/certificate_authorities/${res.body.id}`,
      created_at: expect.stringMatching(RFC3339),
      description: 'client CA',
      metadata: '{"team":"ops"}',
      ca_pem: testCa,
      subject_common_name: 'Test CA',
      not_before: rfc3339(x509.validFrom),
      not_after: rfc3339(x509.validTo),
      key_usages: [],
      extended_key_usages: [],
    });
    expect(res.body.not_before).toMatch(RFC3339);
    expect(Date.parse(res.body.not_after) - Date.parse(res.body.not_before)).toBe(
      30 * 24 * 3600 * 1000,
    );
    expect((await api.call('GET', `/certificate_authorities/${res.body.id}`)).body).toEqual(
      res.body,
    );
  });

  it('reports key usages and extended key usages by name', async () => {
    const res = await api.call('POST', '/certificate_authorities', { ca_pem: usageCa });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      subject_common_name: 'Acme Client CA',
      key_usages: ['digital_signature', 'cert_sign', 'crl_sign'],
      extended_key_usages: ['client_auth', 'server_auth'],
      description: '',
      metadata: '',
    });
  });

  it('accepts text around the PEM block and CRLF line ends', async () => {
    const wrapped = `Subject: CN=Other CA\r\n${otherCa.replace(/\n/g, '\r\n')}\r\n`;
    const res = await api.call('POST', '/certificate_authorities', { ca_pem: wrapped });
    expect(res.status).toBe(201);
    expect(res.body.subject_common_name).toBe('Other CA');
    expect(res.body.ca_pem).toBe(otherCa);
  });

  it('refuses what is not exactly one CA certificate in PEM, with ERR_NGROK_7400', async () => {
    const body = testCa.split('\n');
    const corrupt = [body[0], 'AAAA' + body[1]!.slice(4), ...body.slice(2)].join('\n');
    const cases: Array<[string, RegExp]> = [
      ['hello', /PEM/],
      [Buffer.from(testCa).toString('base64'), /PEM/],
      [testCa + otherCa, /2 certificates/],
      [leaf, /not a certificate authority/],
      [testCa + testCaKey, /private key/],
      ['-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n', /not a valid/],
      [corrupt, /not a valid|malformed/],
      ['', /PEM/],
    ];
    for (const [caPem, message] of cases) {
      const res = await api.call('POST', '/certificate_authorities', { ca_pem: caPem });
      expect(res.status, caPem.slice(0, 40)).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_7400',
        details: { field: 'ca_pem' },
      });
      expect(res.body.msg).toMatch(/^ca_pem: /);
      expect(res.body.msg).toMatch(message);
    }
    const missing = await api.call('POST', '/certificate_authorities', { description: 'x' });
    expect(missing.body).toMatchObject({ error_code: 'ERR_NGROK_215', msg: 'ca_pem: is required' });
    const list = await api.call('GET', '/certificate_authorities');
    expect(
      list.body.certificate_authorities.map((c: { ca_pem: string }) => c.ca_pem),
    ).not.toContain(leaf);
  });

  it('updates description and metadata only; ca_pem cannot be patched', async () => {
    const { body: created } = await api.call('POST', '/certificate_authorities', {
      ca_pem: testCa,
      description: 'before',
    });
    const patched = await api.call('PATCH', `/certificate_authorities/${created.id}`, {
      metadata: 'm2',
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created, metadata: 'm2' });
    const empty = await api.call('PATCH', `/certificate_authorities/${created.id}`, {});
    expect(empty.body).toEqual(patched.body);
    const pem = await api.call('PATCH', `/certificate_authorities/${created.id}`, {
      ca_pem: otherCa,
    });
    expect(pem.status).toBe(400);
    expect(pem.body).toMatchObject({ error_code: 'ERR_NGROK_214', details: { field: 'ca_pem' } });
  });

  it('lists newest first with paging, and deletes', async () => {
    const a = (await api.call('POST', '/certificate_authorities', { ca_pem: testCa })).body.id;
    const b = (await api.call('POST', '/certificate_authorities', { ca_pem: otherCa })).body.id;
    const list = await api.call('GET', '/certificate_authorities?limit=1');
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/certificate_authorities`);
    expect(list.body.certificate_authorities.map((c: { id: string }) => c.id)).toEqual([b]);
    expect(list.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/certificate_authorities?before_id=${b}&limit=1`,
    );
    expect(
      (await api.call('GET', `/certificate_authorities?before_id=${b}&limit=1`)).body
        .certificate_authorities[0].id,
    ).toBe(a);
    expect((await api.call('DELETE', `/certificate_authorities/${a}`)).status).toBe(204);
    expect((await api.call('GET', `/certificate_authorities/${a}`)).status).toBe(404);
    expect((await api.call('DELETE', `/certificate_authorities/${a}`)).status).toBe(404);
  });

  it('refuses to delete a CA that a TLS edge uses, naming the edge', async () => {
    const id = (await api.call('POST', '/certificate_authorities', { ca_pem: testCa })).body.id;
    const edgeId = 'edgtls_2f8XhbJ2X1W4M8oVqQ1UuRgVjbw';
    await api.store.db.insertInto('refs').values({ from_id: edgeId, to_id: id }).execute();
    const refused = await api.call('DELETE', `/certificate_authorities/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error_code).toBe('ERR_NGROK_7401');
    expect(refused.body.msg).toContain(edgeId);
    expect((await api.call('GET', `/certificate_authorities/${id}`)).status).toBe(200);
    expect(await api.repos.certificateAuthorities.pemsFor([id])).toEqual([testCa]);
    await api.store.db.deleteFrom('refs').where('from_id', '=', edgeId).execute();
    expect((await api.call('DELETE', `/certificate_authorities/${id}`)).status).toBe(204);
    expect(await api.repos.certificateAuthorities.missing([id])).toEqual([id]);
  });
});

describe('parseCaPem fields', () => {
  const ca = (subject: string, extensions: string[], key: 'ec' | 'rsa' = 'ec') =>
    parseCaPem(maker.make(subject, [...CA_EXTENSIONS, ...extensions], { key }));

  it('reads every key usage bit and names unknown extended key usages by OID', () => {
    const parsed = ca('/O=Acme/CN=Test CA', [
      'keyUsage=critical,digitalSignature,keyCertSign,cRLSign,decipherOnly,keyAgreement',
      'extendedKeyUsage=serverAuth,clientAuth,1.2.3.4.5',
    ]);
    expect(parsed).toMatchObject({
      subject_common_name: 'Test CA',
      key_usages: ['digital_signature', 'key_agreement', 'cert_sign', 'crl_sign', 'decipher_only'],
      extended_key_usages: ['server_auth', 'client_auth', '1.2.3.4.5'],
    });
  });

  it('keeps the CN as stored (UTF-8, commas, quotes), the most specific one, or empty', () => {
    expect(ca('/CN=Café, "Ops" CA', []).subject_common_name).toBe('Café, "Ops" CA');
    expect(ca('/CN=Root/CN=Leaf', []).subject_common_name).toBe('Leaf');
    expect(ca('/O=Only Org', []).subject_common_name).toBe('');
  });

  it('reads RSA certificates too', () => {
    expect(ca('/CN=RSA CA', ['keyUsage=keyCertSign'], 'rsa')).toMatchObject({
      subject_common_name: 'RSA CA',
      key_usages: ['cert_sign'],
      extended_key_usages: [],
    });
  });
});
