import { mkdtempSync, renameSync, unwatchFile, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindPolicy, oneRule, sync } from '../../test/support/policy-fixtures.js';
import { double, writeMmdb, type MmdbEntry } from '../../test/support/mmdb-writer.js';
import { configureIpIntelligence, lookupIpIntel, openIpIntelligence } from './ip-intel.js';

/**
 * IP intelligence from MaxMind DB files built here (test ranges mapped to made-up places), read
 * by the real reader (`maxmind`), through policies as ngrok's examples write them.
 */

const city = (code: string, name: string, town: string, lat: number): MmdbEntry['record'] => ({
  city: { names: { en: town } },
  country: { iso_code: code, names: { en: name } },
  subdivisions: [{ iso_code: 'IDF', names: { en: 'Île-de-France' } }],
  location: {
    latitude: double(lat),
    longitude: double(2.35),
    accuracy_radius: 20,
    time_zone: 'Europe/Paris',
  },
  postal: { code: '75001' },
});

const dir = mkdtempSync(join(tmpdir(), 'burrow-geoip-'));
const files = {
  city: join(dir, 'city.mmdb'),
  asn: join(dir, 'asn.mmdb'),
  categories: join(dir, 'categories.mmdb'),
};

beforeAll(async () => {
  writeFileSync(
    files.city,
    writeMmdb('GeoLite2-City', [
      { cidr: '192.0.2.0/24', record: city('FR', 'France', 'Paris', 48.85) },
      { cidr: '198.51.100.0/24', record: city('CA', 'Canada', 'Montreal', 45.5) },
    ]),
  );
  writeFileSync(
    files.asn,
    writeMmdb('GeoLite2-ASN', [
      {
        cidr: '192.0.2.0/24',
        record: {
          autonomous_system_number: 64500,
          autonomous_system_organization: 'Example Transit',
        },
      },
    ]),
  );
  writeFileSync(
    files.categories,
    writeMmdb('Burrow-Categories', [
      {
        cidr: '198.51.100.0/25',
        record: { categories: ['proxy.anonymous.tor', 'blocklist.example.drop'] },
      },
      { cidr: '203.0.113.0/24', record: { categories: ['com.github'] } },
    ]),
  );
  configureIpIntelligence(await openIpIntelligence(files));
});
afterAll(() => {
  configureIpIntelligence(undefined);
  for (const f of Object.values(files)) unwatchFile(f);
});

const req = { method: 'GET', url: '/', headers: { host: 'app.burrow.test' } };
const answer = (policy: Record<string, unknown>, ip: string): string => {
  const d = sync(bindPolicy(policy, 'http').runner.onHttpRequest({ conn: { client_ip: ip }, req }));
  return d.kind === 'respond' ? `${d.status} ${d.body}` : d.kind;
};

describe('IP intelligence', () => {
  it('fills conn.client_ip.geo.location.*, .as.* and conn.geo.* from the databases', () => {
    const policy = oneRule('on_http_request', [
      {
        type: 'custom-response',
        config: {
          body: '${conn.client_ip.geo.location.country_code} ${conn.client_ip.geo.location.city} ${conn.client_ip.geo.location.subdivision} ${conn.client_ip.geo.location.latitude} ${conn.client_ip.geo.location.radius} ${conn.client_ip.as.number} ${conn.client_ip.as.organization} ${conn.geo.country} ${conn.Geo.CountryCode}',
        },
      },
    ]);
    expect(answer(policy, '192.0.2.10')).toBe(
      '200 FR Paris Île-de-France 48.85 20 64500 Example Transit France FR',
    );
    expect(answer(policy, '198.51.100.7')).toBe(
      '200 CA Montreal Île-de-France 45.5 20 0  Canada CA',
    );
    // Unknown: strings empty, numbers 0.
    expect(answer(policy, '203.0.113.9')).toBe(
      ['200', '', '', '', '0', '0', '0', '', '', ''].join(' '),
    );
  });

  it("runs ngrok's examples: deny by country, categories and blocklists", () => {
    const byCountry = oneRule(
      'on_http_request',
      [{ type: 'deny', config: { status_code: 403 } }],
      ["conn.client_ip.geo.location.country_code in ['FR', 'DE']"],
    );
    expect(answer(byCountry, '192.0.2.10')).toBe('403 ');
    expect(answer(byCountry, '198.51.100.7')).toBe('continue');
    const tor = oneRule(
      'on_http_request',
      [{ type: 'deny' }],
      ["'proxy.anonymous.tor' in conn.client_ip.categories || conn.client_ip.is_on_blocklist"],
    );
    expect(answer(tor, '198.51.100.7')).toMatch(/^403/);
    expect(answer(tor, '198.51.100.200')).toBe('continue');
    expect(answer(tor, '203.0.113.9')).toBe('continue');
    // conn.client_ip is still a string for everything else.
    const both = oneRule(
      'on_http_request',
      [{ type: 'custom-response', config: { body: '${conn.client_ip}' } }],
      [
        "inCidrRange(conn.client_ip, '192.0.2.0/24') && conn.client_ip.startsWith('192.')",
        'conn.client_ip.as.number == 64500',
      ],
    );
    expect(answer(both, '192.0.2.10')).toBe('200 192.0.2.10');
  });

  it('puts client_geo in the events of a known client, none for an unknown one', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'deny' }], ["req.url.path == '/x'"]),
      'http',
    );
    sync(runner.onHttpRequest({ conn: { client_ip: '192.0.2.10' }, req: { ...req, url: '/x' } }));
    sync(runner.onHttpRequest({ conn: { client_ip: '203.0.113.9' }, req: { ...req, url: '/x' } }));
    const [unknown, known] = events.eventsFor(owner);
    expect(known).toMatchObject({
      client_ip: '192.0.2.10',
      client_geo: {
        country_code: 'FR',
        city: 'Paris',
        as_number: 64500,
        as_organization: 'Example Transit',
      },
    });
    expect(unknown).not.toHaveProperty('client_geo');
  });

  it('knows nothing of an address outside the databases, or of IPv6, without failing', () => {
    expect(lookupIpIntel('2001:db8::1')).toEqual({});
    const policy = oneRule('on_http_request', [
      {
        type: 'custom-response',
        config: { body: '[${conn.client_ip.geo.location.country_code}]' },
      },
    ]);
    expect(answer(policy, '2001:db8::1')).toBe('200 []');
  });

  it('reads a replaced file without a restart', async () => {
    const next = join(dir, 'next.mmdb');
    writeFileSync(
      next,
      writeMmdb('GeoLite2-City', [
        { cidr: '192.0.2.0/24', record: city('DE', 'Germany', 'Berlin', 52.5) },
      ]),
    );
    renameSync(next, files.city);
    const deadline = Date.now() + 30_000;
    while (lookupIpIntel('192.0.2.10')?.country_code !== 'DE' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(lookupIpIntel('192.0.2.10')).toMatchObject({ country_code: 'DE', city: 'Berlin' });
  }, 40_000);

  it('refuses a file that is no MaxMind DB, naming the option', async () => {
    const bad = join(dir, 'bad.mmdb');
    writeFileSync(bad, 'not a database');
    await expect(openIpIntelligence({ city: bad, asn: '', categories: '' })).rejects.toThrow(
      /--geoip-city .*bad\.mmdb: not a readable MaxMind DB/,
    );
  });
});
