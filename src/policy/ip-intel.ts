import type { Reader } from 'maxmind';
import maxmind, { type AsnResponse, type CityResponse, type Response } from 'maxmind';
import type { GeoipFiles } from '../core/policy-data-options.js';

/**
 * IP intelligence for policies: where a client address is (`conn.client_ip.geo.location.*`,
 * `conn.geo.*`), its network (`conn.client_ip.as.*`) and categories
 * (`conn.client_ip.categories`, `is_on_blocklist`), read from MaxMind-format databases the
 * operator gives (`--geoip-city`, `--geoip-asn`, `--geoip-categories`) with the maintained
 * reader `maxmind` (MIT), which re-reads a file when it changes: no restart to update them.
 * Burrow ships no database (GeoLite2's licence needs each user's own acceptance).
 */

/** What the databases say of one address; a field they do not know is absent. */
export interface IpIntel {
  city?: string;
  country?: string;
  country_code?: string;
  subdivision?: string;
  subdivision_code?: string;
  postal_code?: string;
  timezone?: string;
  latitude?: number;
  longitude?: number;
  /** Accuracy radius, km. */
  radius?: number;
  as_number?: number;
  as_organization?: string;
  categories?: readonly string[];
}

/** Where lookups go: the operator's databases, or a test's. */
export interface IpIntelligenceSource {
  lookup(ip: string): IpIntel | undefined;
}

/** A categories database's record: a list of category names. */
interface CategoriesRecord {
  categories?: unknown;
}

let source: IpIntelligenceSource | undefined;

/** Set (or with undefined, clear) the process's source; the server calls it once at start. */
export function configureIpIntelligence(next: IpIntelligenceSource | undefined): void {
  source = next;
}

/** What the process's source says of `ip`, or undefined when there is none or it knows nothing. */
export function lookupIpIntel(ip: string): IpIntel | undefined {
  return source?.lookup(ip);
}

/** Lookups in MaxMind-format readers (any of which may be absent). */
export class MaxMindIntelligence implements IpIntelligenceSource {
  constructor(
    private readonly readers: {
      city?: Reader<CityResponse> | undefined;
      asn?: Reader<AsnResponse> | undefined;
      /** Any MaxMind DB whose records have a `categories` list (the reader's types know none). */
      categories?: Reader<Response> | undefined;
    },
  ) {}

  lookup(ip: string): IpIntel | undefined {
    const out: IpIntel = {};
    const city = read(this.readers.city, ip);
    if (city) {
      const sub = city.subdivisions?.[0];
      Object.assign(out, {
        city: city.city?.names.en,
        country: city.country?.names.en,
        country_code: city.country?.iso_code,
        subdivision: sub?.names.en,
        subdivision_code: sub?.iso_code,
        postal_code: city.postal?.code,
        timezone: city.location?.time_zone,
        latitude: city.location?.latitude,
        longitude: city.location?.longitude,
        radius: city.location?.accuracy_radius,
      });
    }
    const asn = read(this.readers.asn, ip);
    if (asn) {
      out.as_number = asn.autonomous_system_number;
      out.as_organization = asn.autonomous_system_organization;
    }
    const record = read(this.readers.categories, ip) as CategoriesRecord | undefined;
    const categories = record?.categories;
    if (Array.isArray(categories)) {
      out.categories = categories.filter((c): c is string => typeof c === 'string');
    }
    return out;
  }
}

/** A reader's record for `ip`; an address the database cannot hold (IPv6 in an IPv4 one) is none. */
function read<T extends Response>(reader: Reader<T> | undefined, ip: string): T | undefined {
  if (!reader) return undefined;
  try {
    return reader.get(ip.startsWith('::ffff:') ? ip.slice(7) : ip) ?? undefined;
  } catch {
    return undefined;
  }
}

/**
 * Open the operator's databases, watched so that a replaced file is read again. Undefined when
 * no file is given. Throws (naming the option) when a file cannot be read as a MaxMind DB.
 * @example configureIpIntelligence(await openIpIntelligence(config.geoip));
 */
export async function openIpIntelligence(
  files: GeoipFiles,
): Promise<MaxMindIntelligence | undefined> {
  const open = async (option: string, path: string): Promise<Reader<Response> | undefined> => {
    if (path === '') return undefined;
    try {
      // Lookups are cached per database (the reader's LRU) and the file is watched.
      return await maxmind.open<Response>(path, {
        watchForUpdates: true,
        watchForUpdatesNonPersistent: true,
        cache: { max: 10_000 },
      });
    } catch (err) {
      throw new Error(`--${option} ${path}: not a readable MaxMind DB: ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
  const [city, asn, categories] = await Promise.all([
    open('geoip-city', files.city),
    open('geoip-asn', files.asn),
    open('geoip-categories', files.categories),
  ]);
  if (!city && !asn && !categories) return undefined;
  return new MaxMindIntelligence({
    city: city as Reader<CityResponse> | undefined,
    asn: asn as Reader<AsnResponse> | undefined,
    categories,
  });
}
