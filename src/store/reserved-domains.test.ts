import { beforeAll, describe, expect, it } from 'vitest';
import { withTestStore } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { normalizeDomain } from './reserved-domains.js';

describe('normalizeDomain', () => {
  it('lowercases and drops one trailing root dot', () => {
    expect(normalizeDomain('*.SiteA.Example.COM.')).toBe('*.sitea.example.com');
    expect(normalizeDomain('app.example.com')).toBe('app.example.com');
  });
});

describe.each(DATABASE_KINDS)('ReservedDomainRepository lookups (%s)', (kind) => {
  const t = withTestStore(kind);
  beforeAll(async () => {
    for (const domain of [
      '*.example.com',
      '*.sitea.example.com',
      'exact.sitea.example.com',
      'plain.example.net',
    ])
      await t.repos.reservedDomains.create({ domain });
  });

  it('findByDomain finds exact names only, case-insensitively', async () => {
    expect((await t.repos.reservedDomains.findByDomain('Plain.Example.net'))?.domain).toBe(
      'plain.example.net',
    );
    expect((await t.repos.reservedDomains.findByDomain('*.sitea.example.com'))?.domain).toBe(
      '*.sitea.example.com',
    );
    expect(await t.repos.reservedDomains.findByDomain('dev1.sitea.example.com')).toBeUndefined();
  });

  it('findCovering prefers the exact name, then the longest covering wildcard', async () => {
    const covering = async (name: string) =>
      (await t.repos.reservedDomains.findCovering(name))?.domain;
    expect(await covering('exact.sitea.example.com')).toBe('exact.sitea.example.com');
    expect(await covering('dev1.sitea.example.com')).toBe('*.sitea.example.com');
    expect(await covering('a.b.DEV1.sitea.example.com')).toBe('*.sitea.example.com');
    expect(await covering('*.x.sitea.example.com')).toBe('*.sitea.example.com');
    expect(await covering('sitea.example.com')).toBe('*.example.com');
    expect(await covering('other.example.com')).toBe('*.example.com');
    expect(await covering('example.com')).toBeUndefined();
    expect(await covering('x.plain.example.net')).toBeUndefined();
    expect(await covering('nothing.invalid')).toBeUndefined();
    expect(await covering('localhost')).toBeUndefined();
  });

  it('counts a wildcard domain under the base domain as the server’s', async () => {
    expect(t.repos.reservedDomains.isServerDomain('*.team.burrow.test')).toBe(true);
    expect(t.repos.reservedDomains.isServerDomain('burrow.test')).toBe(true);
    expect(t.repos.reservedDomains.isServerDomain('xburrow.test')).toBe(false);
  });
});
