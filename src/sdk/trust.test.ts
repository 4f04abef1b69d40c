import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../edge/certificates/certificates.js';
import { BurrowAgentError } from './errors.js';
import {
  certificateFingerprint,
  defaultRootCertificates,
  parseCaFingerprint,
  resolveTrust,
  splitPemCertificates,
  trustAnchors,
  trustContext,
} from './trust.js';

const HEX = 'ab'.repeat(16) + '0123456789ABCDEF'.repeat(2);
const NODE_FORM = HEX.toUpperCase().replace(/(..)(?!$)/g, '$1:');

describe('parseCaFingerprint', () => {
  it.each([
    ['plain hex', HEX],
    ['upper case', HEX.toUpperCase()],
    ['colons', NODE_FORM],
    ['colons, lower case', NODE_FORM.toLowerCase()],
    ['the sha256: prefix Burrow prints', `sha256:${NODE_FORM}`],
    ['SHA256: upper-case prefix, no colons', `SHA256:${HEX}`],
    ['sha-256: prefix', `sha-256:${HEX}`],
    ["openssl's output", `sha256 Fingerprint=${NODE_FORM}`],
    ['spaces around and inside', `  ${NODE_FORM.replace(/:/g, ' ')}  `],
  ])('reads %s', (_what, text) => {
    expect(parseCaFingerprint(text)).toBe(NODE_FORM);
  });

  it.each([
    ['empty', ''],
    ['too short', HEX.slice(2)],
    ['too long', HEX + 'ab'],
    ['not hex', HEX.slice(2) + 'zz'],
    ['a SHA-1 fingerprint', 'sha1:' + 'ab'.repeat(20)],
    ['another prefix', `md5:${HEX}`],
  ])('refuses %s, saying what a fingerprint looks like', (_what, text) => {
    expect(() => parseCaFingerprint(text)).toThrow(BurrowAgentError);
    expect(() => parseCaFingerprint(text)).toThrow(
      /must be a SHA-256 one, 64 hexadecimal digits .* sha256:AB:CD:… that `burrow server` prints/,
    );
  });
});

describe('trust', () => {
  let dir: string;
  let ca: LocalCa;
  let other: LocalCa;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-trust-'));
    ca = await LocalCa.loadOrCreate(join(dir, 'a'));
    other = await LocalCa.loadOrCreate(join(dir, 'b'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints fingerprints as sha256:AB:… of the DER, like openssl', () => {
    const fp = certificateFingerprint(ca.certPem);
    expect(fp).toBe(`sha256:${new X509Certificate(ca.certPem).fingerprint256}`);
    expect(fp).toMatch(/^sha256:([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  });

  it('splits a bundle into certificates', () => {
    expect(splitPemCertificates(`junk\n${ca.certPem}\nmore\n${other.certPem}`)).toHaveLength(2);
    expect(splitPemCertificates('nothing')).toEqual([]);
  });

  it('reads CAs from paths, PEM text and bytes, one or a list', () => {
    writeFileSync(join(dir, 'bundle.pem'), ca.certPem + other.certPem);
    expect(resolveTrust(join(dir, 'bundle.pem'), undefined).extra).toHaveLength(2);
    expect(resolveTrust([ca.certPem, Buffer.from(other.certPem)], undefined).extra).toHaveLength(2);
    expect(resolveTrust(undefined, undefined)).toEqual({
      extra: [],
      pin: undefined,
      pinned: undefined,
    });
    writeFileSync(join(dir, 'empty.pem'), 'not a certificate');
    expect(() => resolveTrust(join(dir, 'empty.pem'), undefined)).toThrow(
      /empty\.pem holds no PEM certificate/,
    );
    expect(() => resolveTrust(join(dir, 'missing.pem'), undefined)).toThrow(
      /cannot read the CA file/,
    );
  });

  it('knows the pinned certificate at once when a given CA has the fingerprint', () => {
    const pin = certificateFingerprint(ca.certPem);
    const known = resolveTrust([other.certPem, ca.certPem], pin.toLowerCase());
    expect(known.pin).toBe(pin.slice('sha256:'.length));
    expect(known.pinned?.trim()).toBe(ca.certPem.trim());
    expect(resolveTrust(other.certPem, pin).pinned).toBeUndefined();
  });

  it('adds the CAs to the system roots, and trusts a pinned root alone', () => {
    const roots = defaultRootCertificates();
    expect(roots.length).toBeGreaterThanOrEqual(tls.rootCertificates.length);
    const trust = resolveTrust(ca.certPem, undefined);
    const anchors = trustAnchors(trust);
    expect(anchors).toHaveLength(roots.length + 1);
    expect(anchors).toContain(trust.extra[0]);
    const pinned = resolveTrust(ca.certPem, certificateFingerprint(ca.certPem));
    expect(trustAnchors(pinned)).toEqual([pinned.pinned]);
  });

  it('builds one secure context per distinct trust, shared by sessions that hold the same', () => {
    const first = trustContext(resolveTrust(ca.certPem, undefined));
    // Another session given the same CA (a new EdgeTrust, same content) gets the same context.
    expect(trustContext(resolveTrust(ca.certPem, undefined))).toBe(first);
    expect(trustContext(resolveTrust(other.certPem, undefined))).not.toBe(first);
    const pinned = resolveTrust(ca.certPem, certificateFingerprint(ca.certPem));
    expect(trustContext(pinned)).not.toBe(first);
    expect(trustContext(pinned)).toBe(trustContext(pinned));
  });
});
