import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../core/logger.js';
import { startTlsServer, tlsProbe, type TestTlsServer } from '../../../test/support/tls.js';
import { wildcardSanFor } from './certificate-names.js';
import { CertificateRefusedError, CertificateStore } from './certificate-store.js';
import { LocalCa } from './local-ca.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const BASE = 'burrow.test';
const WILDCARD = '*.sitea.example.com';

/** The policy the edge will apply: names under the base domain and reserved domains. */
function served(name: string): boolean {
  return (
    name.endsWith(`.${BASE}`) || name === 'app.example.com' || name.endsWith('.sitea.example.com')
  );
}

function leafOf(certPem: string): X509Certificate {
  return new X509Certificate(certPem.split(/(?<=-----END CERTIFICATE-----)/)[0]!.trim());
}

let dataDir: string;
let ca: LocalCa;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'burrow-store-'));
  ca = await LocalCa.loadOrCreate(dataDir);
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('CertificateStore over real TLS (SNICallback)', () => {
  let store: CertificateStore;
  let server: TestTlsServer;
  let issue: ReturnType<typeof vi.spyOn>;

  beforeAll(async () => {
    store = new CertificateStore({
      ca,
      nameAllowed: served,
      sanFor: (name) => wildcardSanFor(name, WILDCARD),
    });
    issue = vi.spyOn(ca, 'issue');
    server = await startTlsServer({ SNICallback: store.sniCallback });
  });

  afterAll(async () => {
    issue.mockRestore();
    await server.close();
  });

  it('serves a verified certificate for a name under the base domain', async () => {
    const result = await tlsProbe({ port: server.port, ca: ca.certPem, servername: `app.${BASE}` });
    expect(result).toMatchObject({ ok: true });
    expect(result.peer?.subjectaltname).toBe(`DNS:app.${BASE}`);
  });

  it('serves one wildcard leaf for every name one label under a wildcard domain', async () => {
    issue.mockClear();
    const a = await tlsProbe({
      port: server.port,
      ca: ca.certPem,
      servername: 'dev1.sitea.example.com',
    });
    const b = await tlsProbe({
      port: server.port,
      ca: ca.certPem,
      servername: 'dev2.sitea.example.com',
    });
    expect(a.ok && b.ok).toBe(true);
    expect(a.peer?.subjectaltname).toBe(`DNS:${WILDCARD}`);
    expect(b.peer?.serialNumber).toBe(a.peer?.serialNumber);
    expect(issue).toHaveBeenCalledTimes(1);

    // A certificate wildcard covers one label only, so deeper names get their own leaf.
    const deep = await tlsProbe({
      port: server.port,
      ca: ca.certPem,
      servername: 'a.b.sitea.example.com',
    });
    expect(deep).toMatchObject({ ok: true });
    expect(deep.peer?.subjectaltname).toBe('DNS:a.b.sitea.example.com');
  });

  it('fails verification when the client checks a name the leaf does not cover', async () => {
    const result = await tlsProbe({
      port: server.port,
      ca: ca.certPem,
      servername: `app.${BASE}`,
      verifyAs: `other.${BASE}`,
    });
    expect(result).toMatchObject({ ok: false, error: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  });

  it('fails verification for a client that does not trust the local CA', async () => {
    const other = await LocalCa.loadOrCreate(join(dataDir, 'other'));
    const result = await tlsProbe({
      port: server.port,
      ca: other.certPem,
      servername: `app.${BASE}`,
    });
    expect(result.ok).toBe(false);
    // The chain carries our CA, which this client does not trust.
    expect(result.error).toBe('SELF_SIGNED_CERT_IN_CHAIN');
  });

  it('refuses names the edge does not serve, without issuing anything', async () => {
    issue.mockClear();
    const result = await tlsProbe({
      port: server.port,
      ca: ca.certPem,
      servername: 'evil.example.org',
    });
    expect(result.ok).toBe(false);
    await expect(store.certificateFor('evil.example.org')).rejects.toBeInstanceOf(
      CertificateRefusedError,
    );
    await expect(store.certificateFor('evil.example.org')).rejects.toThrow(
      'no certificate for "evil.example.org": this edge does not serve that name',
    );
    expect(issue).not.toHaveBeenCalled();
  });
});

describe('CertificateStore', () => {
  it('normalizes names and refuses invalid or wildcard SNI values before asking the policy', async () => {
    const nameAllowed = vi.fn(() => true);
    const store = new CertificateStore({ ca, nameAllowed });
    await expect(store.certificateFor('../../etc/passwd')).rejects.toThrow(CertificateRefusedError);
    await expect(store.certificateFor('*.burrow.test')).rejects.toThrow(
      /cannot ask for a wildcard/,
    );
    expect(nameAllowed).not.toHaveBeenCalled();
    const served = await store.certificateFor('App.Burrow.Test.');
    expect(nameAllowed).toHaveBeenCalledWith('app.burrow.test');
    expect(served.names).toEqual(['app.burrow.test']);
  });

  it('waits for an asynchronous policy and refuses when it says no', async () => {
    const store = new CertificateStore({ ca, nameAllowed: async (n) => n === 'yes.burrow.test' });
    await expect(store.certificateFor('yes.burrow.test')).resolves.toMatchObject({
      source: 'local-ca',
    });
    await expect(store.certificateFor('no.burrow.test')).rejects.toThrow(CertificateRefusedError);
  });

  it('issues once for many concurrent requests for the same certificate', async () => {
    const issue = vi.spyOn(ca, 'issue');
    try {
      const store = new CertificateStore({
        ca,
        nameAllowed: () => true,
        sanFor: (name) => wildcardSanFor(name, WILDCARD),
      });
      const names = Array.from({ length: 30 }, (_, i) => `n${i % 3}.sitea.example.com`);
      const results = await Promise.all(names.map((n) => store.certificateFor(n)));
      expect(issue).toHaveBeenCalledTimes(1);
      expect(new Set(results.map((r) => r.context)).size).toBe(1);
      expect(store.size).toBe(1);
    } finally {
      issue.mockRestore();
    }
  });

  it('does not cache a failed issuance', async () => {
    const issue = vi.spyOn(ca, 'issue').mockRejectedValueOnce(new Error('disk on fire'));
    try {
      const store = new CertificateStore({ ca, nameAllowed: () => true });
      await expect(store.certificateFor('x.burrow.test')).rejects.toThrow('disk on fire');
      await expect(store.certificateFor('x.burrow.test')).resolves.toMatchObject({
        names: ['x.burrow.test'],
      });
      expect(issue).toHaveBeenCalledTimes(2);
    } finally {
      issue.mockRestore();
    }
  });

  it('keeps at most maxEntries certificates, dropping the least recently used', async () => {
    const issue = vi.spyOn(ca, 'issue');
    try {
      const store = new CertificateStore({ ca, nameAllowed: () => true, maxEntries: 2 });
      await store.certificateFor('a.burrow.test');
      await store.certificateFor('b.burrow.test');
      await store.certificateFor('a.burrow.test'); // a is now the most recent
      await store.certificateFor('c.burrow.test'); // evicts b
      expect(store.size).toBe(2);
      expect(issue).toHaveBeenCalledTimes(3);
      await store.certificateFor('a.burrow.test');
      expect(issue).toHaveBeenCalledTimes(3);
      await store.certificateFor('b.burrow.test');
      expect(issue).toHaveBeenCalledTimes(4);
    } finally {
      issue.mockRestore();
    }
  });

  it('renews in the background near expiry and reissues at once after expiry', async () => {
    let now = Date.now();
    const store = new CertificateStore({ ca, nameAllowed: () => true, now: () => now });
    const first = await store.certificateFor('r.burrow.test');
    expect(first.renewAt).toBe(first.notAfter.getTime() - 30 * DAY_MS);

    now += 59 * DAY_MS; // not yet due
    expect(await store.certificateFor('r.burrow.test')).toBe(first);

    now += 2 * DAY_MS; // due: the old certificate is still served while a new one is made
    expect(await store.certificateFor('r.burrow.test')).toBe(first);
    await vi.waitFor(async () => {
      expect(await store.certificateFor('r.burrow.test')).not.toBe(first);
    });
    const renewed = await store.certificateFor('r.burrow.test');
    expect(leafOf(renewed.certPem).serialNumber).not.toBe(leafOf(first.certPem).serialNumber);
    expect(renewed.notAfter.getTime()).toBeGreaterThan(first.notAfter.getTime());

    now = renewed.notAfter.getTime() + 1; // expired: never served, replaced before answering
    const replaced = await store.certificateFor('r.burrow.test');
    expect(replaced).not.toBe(renewed);
    expect(replaced.notAfter.getTime()).toBeGreaterThan(now);
  });

  it('refuses a sanFor answer that does not cover the name', async () => {
    const store = new CertificateStore({
      ca,
      nameAllowed: () => true,
      sanFor: () => ['other.burrow.test'],
    });
    await expect(store.certificateFor('x.burrow.test')).rejects.toThrow(/does not cover it/);
  });

  it('prefers a real certificate from certsDir, exact or wildcard, over the local CA', async () => {
    const certsDir = join(dataDir, 'certs-real');
    mkdirSync(certsDir, { recursive: true });
    const publicCa = await LocalCa.loadOrCreate(join(dataDir, 'public-ca'));
    const exact = await publicCa.issue(['app.example.com']);
    writeFileSync(join(certsDir, 'app.example.com.pem'), exact.certPem);
    writeFileSync(join(certsDir, 'app.example.com.key'), exact.keyPem);
    const wildcard = await publicCa.issue([WILDCARD]);
    writeFileSync(join(certsDir, '_wildcard.sitea.example.com.pem'), wildcard.certPem);
    writeFileSync(join(certsDir, '_wildcard.sitea.example.com.key'), wildcard.keyPem);

    const store = new CertificateStore({ ca, nameAllowed: served, certsDir });
    const server = await startTlsServer({ SNICallback: store.sniCallback });
    try {
      const probe = (servername: string, trust: string) =>
        tlsProbe({ port: server.port, ca: trust, servername });
      expect(await probe('app.example.com', publicCa.certPem)).toMatchObject({ ok: true });
      expect(await probe('dev1.sitea.example.com', publicCa.certPem)).toMatchObject({ ok: true });
      // Names without a file still come from the local CA.
      expect(await probe(`app.${BASE}`, ca.certPem)).toMatchObject({ ok: true });
      expect((await store.certificateFor('app.example.com')).source).toBe('file');
      expect((await store.certificateFor(`app.${BASE}`)).source).toBe('local-ca');
    } finally {
      await server.close();
    }
  });

  it('picks up a replaced certificate file once the lookup is rechecked', async () => {
    const certsDir = join(dataDir, 'certs-replace');
    mkdirSync(certsDir, { recursive: true });
    let now = Date.now();
    const store = new CertificateStore({
      ca,
      nameAllowed: () => true,
      certsDir,
      now: () => now,
      recheckMs: 1000,
    });
    const before = await store.certificateFor('swap.burrow.test');
    expect(before.source).toBe('local-ca');

    const real = await ca.issue(['swap.burrow.test']);
    writeFileSync(join(certsDir, 'swap.burrow.test.pem'), real.certPem);
    writeFileSync(join(certsDir, 'swap.burrow.test.key'), real.keyPem);
    expect(await store.certificateFor('swap.burrow.test')).toBe(before); // still within recheckMs
    now += 1001;
    const after = await store.certificateFor('swap.burrow.test');
    expect(after.source).toBe('file');
    expect(after.certPem).toBe(real.certPem);
  });

  it('falls back to the local CA when a certificate file is unusable', async () => {
    const certsDir = join(dataDir, 'certs-broken');
    mkdirSync(certsDir, { recursive: true });
    const a = await ca.issue(['broken.burrow.test']);
    const b = await ca.issue(['broken.burrow.test']);
    writeFileSync(join(certsDir, 'broken.burrow.test.pem'), a.certPem);
    writeFileSync(join(certsDir, 'broken.burrow.test.key'), b.keyPem); // not a's key
    const warn = vi.fn();
    const logger = { warn, info: vi.fn() } as unknown as Logger;
    const store = new CertificateStore({ ca, nameAllowed: () => true, certsDir, logger });
    const served = await store.certificateFor('broken.burrow.test');
    expect(served.source).toBe('local-ca');
    expect(served.certPem).not.toBe(a.certPem);
    expect(warn).toHaveBeenCalledWith(expect.anything(), 'ignoring unusable certificate file');
  });
});
