import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import { withTestStore } from '../../test/support/api.js';
import { certificateMaker } from '../../test/support/certificates.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { certificateNameCovers } from '../core/hostname.js';
import { parseCertificateAndKey } from './tls-certificates.js';

const maker = certificateMaker();
afterAll(() => maker.cleanup());

function leaf(names: string, options: { days?: number; key?: 'rsa' | 'ec' } = {}) {
  const certificate_pem = maker.make('/CN=' + names.split(',')[0], [`subjectAltName=${names}`], {
    days: options.days ?? 30,
    key: options.key ?? 'ec',
  });
  return { certificate_pem, private_key_pem: maker.lastKey() };
}

describe('parseCertificateAndKey', () => {
  it('reads the names, key type and validity, and never echoes the key', () => {
    const pair = leaf('DNS:app.example.com,DNS:*.app.example.com,IP:192.0.2.7', { key: 'rsa' });
    const parsed = parseCertificateAndKey(pair.certificate_pem, pair.private_key_pem);
    expect(JSON.parse(parsed.dns_names)).toEqual(['app.example.com', '*.app.example.com']);
    expect(JSON.parse(parsed.ips)).toEqual(['192.0.2.7']);
    expect(parsed.private_key_type).toBe('rsa');
    expect(parsed.subject_common_name).toBe('DNS:app.example.com');
  });

  it('reads the names as Node does when @peculiar/x509 cannot read an extension', () => {
    // A certificate policies extension holding a BOOLEAN: OpenSSL and Node take it, the library not.
    const certificate_pem = maker.make(
      '/CN=odd.example.com',
      ['subjectAltName=DNS:Odd.example.com,IP:2001:db8::1', 'certificatePolicies=DER:0101ff'],
      { days: 30, key: 'ec' },
    );
    const parsed = parseCertificateAndKey(certificate_pem, maker.lastKey());
    expect(JSON.parse(parsed.dns_names)).toEqual(['odd.example.com']);
    expect(JSON.parse(parsed.ips)).toEqual(['2001:db8::1']);
    expect(parsed.subject_common_name).toBe('odd.example.com');
  });

  it.each([
    ['no PEM at all', 'hello', undefined, 'certificate_pem', /PEM form/],
    ['a key in the certificate field', 'KEY', undefined, 'certificate_pem', /private_key_pem/],
    ['a key of another certificate', undefined, 'OTHER', 'private_key_pem', /does not belong/],
    ['a key that is not PEM', undefined, 'nonsense', 'private_key_pem', /unencrypted private key/],
  ])('refuses %s, naming the field', (_name, certOverride, keyOverride, field, rule) => {
    const pair = leaf('DNS:a.example.com');
    const other = leaf('DNS:b.example.com');
    const cert =
      certOverride === 'KEY' ? pair.private_key_pem : (certOverride ?? pair.certificate_pem);
    const key =
      keyOverride === 'OTHER' ? other.private_key_pem : (keyOverride ?? pair.private_key_pem);
    let thrown: unknown;
    try {
      parseCertificateAndKey(cert, key);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).field).toBe(field);
    expect((thrown as Error).message).toMatch(rule);
    // Help text may name the PEM form; the key's own bytes never appear.
    expect((thrown as Error).message).not.toContain(pair.private_key_pem.split('\n')[1]);
  });

  it('matches names as TLS clients do: a wildcard covers exactly one label', () => {
    expect(certificateNameCovers('*.example.com', 'a.example.com')).toBe(true);
    expect(certificateNameCovers('*.example.com', 'a.b.example.com')).toBe(false);
    expect(certificateNameCovers('*.example.com', 'example.com')).toBe(false);
    expect(certificateNameCovers('app.example.com', 'app.example.com')).toBe(true);
  });
});

describe.each(DATABASE_KINDS)('TlsCertificateRepository (%s)', (kind) => {
  const t = withTestStore(kind);

  it('stores a certificate without ever returning its key, and serves the longest-lived match', async () => {
    const short = await t.repos.tlsCertificates.create(
      leaf('DNS:*.serve.example.com', { days: 5 }),
    );
    const long = await t.repos.tlsCertificates.create({
      ...leaf('DNS:*.serve.example.com', { days: 50 }),
      description: 'long',
    });
    expect(JSON.stringify(await t.repos.tlsCertificates.get(long.id))).not.toMatch(/PRIVATE KEY/);
    expect(JSON.stringify(await t.repos.tlsCertificates.list({ limit: 100 }))).not.toMatch(
      /PRIVATE KEY/,
    );
    const served = await t.repos.tlsCertificates.servableFor('x.serve.example.com');
    expect(served?.id).toBe(long.id);
    expect(served?.privateKeyPem).toMatch(/PRIVATE KEY/);
    expect(await t.repos.tlsCertificates.servableFor('x.y.serve.example.com')).toBeUndefined();
    // Once the longer one is past its end, the other serves.
    const later = new Date(Date.now() + 20 * 86_400_000);
    expect((await t.repos.tlsCertificates.servableFor('x.serve.example.com', later))?.id).toBe(
      long.id,
    );
    const muchLater = new Date(Date.now() + 60 * 86_400_000);
    expect(
      await t.repos.tlsCertificates.servableFor('x.serve.example.com', muchLater),
    ).toBeUndefined();
    expect(short.id).not.toBe(long.id);
  });

  it('shows IPv6 names in one short form, whether stored short or (older rows) long', async () => {
    const cert = await t.repos.tlsCertificates.create(
      leaf('DNS:ips.example.com,IP:192.0.2.7,IP:2001:db8::1,IP:::ffff:192.0.2.1'),
    );
    const short = ['192.0.2.7', '2001:db8::1', '::ffff:c000:201'];
    expect(cert.subject_alternative_names.ips).toEqual(short);
    // How a row stored before the names were read from the DER holds them (Node's text).
    const long = ['192.0.2.7', '2001:DB8:0:0:0:0:0:1', '0:0:0:0:0:FFFF:C000:201'];
    await t.store.db
      .updateTable('tls_certificates')
      .set({ ips: JSON.stringify(long) })
      .where('id', '=', cert.id)
      .execute();
    expect((await t.repos.tlsCertificates.get(cert.id))?.subject_alternative_names.ips).toEqual(
      short,
    );
  });

  it('refuses to delete a certificate a reserved domain serves, naming the domain', async () => {
    const cert = await t.repos.tlsCertificates.create(leaf('DNS:held.example.com'));
    const domain = await t.repos.reservedDomains.create({
      domain: 'held.example.com',
      certificate_id: cert.id,
    });
    expect(domain.certificate_id).toBe(cert.id);
    expect(domain.certificate_management_policy).toBeNull();
    await expect(t.repos.tlsCertificates.delete(cert.id)).rejects.toThrow(/held\.example\.com/);
    expect(await t.repos.reservedDomains.detachCertificate(domain.id)).toBe(true);
    expect(await t.repos.tlsCertificates.delete(cert.id)).toBe(true);
  });

  it('refuses a certificate and a policy together (434) and an unknown certificate', async () => {
    const cert = await t.repos.tlsCertificates.create(leaf('DNS:both.example.com'));
    await expect(
      t.repos.reservedDomains.create({
        domain: 'both.example.com',
        certificate_id: cert.id,
        certificate_management_policy: {},
      }),
    ).rejects.toMatchObject({ code: 'ERR_NGROK_434', field: 'certificate_id' });
    await expect(
      t.repos.reservedDomains.create({ domain: 'both.example.com', certificate_id: 'cert_nope' }),
    ).rejects.toMatchObject({ code: 'ERR_NGROK_7406', field: 'certificate_id' });
  });

  it('leases a subject to one holder at a time and hands it over when it lapses', async () => {
    let now = 1_000_000;
    const { AcmeStateRepository } = await import('./acme.js');
    const acme = new AcmeStateRepository(t.store.db, () => now);
    expect(await acme.lease('rd_1', 'node-a', 1000)).toBe(true);
    expect(await acme.lease('rd_1', 'node-b', 1000)).toBe(false);
    expect(await acme.lease('rd_1', 'node-a', 1000)).toBe(true);
    now += 1001;
    expect(await acme.lease('rd_1', 'node-b', 1000)).toBe(true);
    await acme.release('rd_1', 'node-b');
    expect(await acme.lease('rd_1', 'node-a', 1000)).toBe(true);
    const id = await acme.putChallenge('dns-01', 'x.acme-challenge.burrow.test', 'v1', 500);
    await acme.putChallenge('dns-01', 'x.acme-challenge.burrow.test', 'v2', 5000);
    expect(await acme.challengeValues('dns-01', 'x.acme-challenge.burrow.test')).toEqual([
      'v1',
      'v2',
    ]);
    now += 600;
    expect(await acme.challengeValues('dns-01', 'x.acme-challenge.burrow.test')).toEqual(['v2']);
    await acme.removeChallenge(id);
    await acme.purgeExpiredChallenges();
    expect(await acme.challengeValues('http-01', 'x.acme-challenge.burrow.test')).toEqual([]);
  });
});
