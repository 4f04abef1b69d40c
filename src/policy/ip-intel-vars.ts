import { lookupIpIntel, type IpIntel } from './ip-intel.js';

/**
 * `conn.client_ip.geo.location.*`, `conn.client_ip.as.*`, `conn.client_ip.categories` and
 * `conn.client_ip.is_on_blocklist`. `conn.client_ip` stays a string (compared, interpolated,
 * passed to inCidrRange); cel.ts reads these fields after it from `conn.client_ip_info`. Unknown
 * strings are `''`, unknown numbers 0, as for every variable.
 */

export class IpLocationVars {
  constructor(private readonly i: IpIntel) {}
  get city(): string {
    return this.i.city ?? '';
  }
  get country(): string {
    return this.i.country ?? '';
  }
  get country_code(): string {
    return this.i.country_code ?? '';
  }
  get subdivision(): string {
    return this.i.subdivision ?? '';
  }
  get subdivision_code(): string {
    return this.i.subdivision_code ?? '';
  }
  get postal_code(): string {
    return this.i.postal_code ?? '';
  }
  get timezone(): string {
    return this.i.timezone ?? '';
  }
  get latitude(): number {
    return this.i.latitude ?? 0;
  }
  get longitude(): number {
    return this.i.longitude ?? 0;
  }
  /** Accuracy radius in km. */
  get radius(): bigint {
    return BigInt(Math.trunc(this.i.radius ?? 0));
  }
}

export class IpGeoVars {
  readonly location: IpLocationVars;
  constructor(i: IpIntel) {
    this.location = new IpLocationVars(i);
  }
}

export class IpAsVars {
  constructor(private readonly i: IpIntel) {}
  get number(): bigint {
    return BigInt(Math.trunc(this.i.as_number ?? 0));
  }
  get organization(): string {
    return this.i.as_organization ?? '';
  }
}

/** Categories that name a threat list: `blocklist.*` (e.g. `blocklist.spamhaus.drop`). */
const BLOCKLIST = /^blocklist\./;

export class IpInfoVars {
  readonly geo: IpGeoVars;
  readonly as: IpAsVars;
  readonly categories: string[];
  readonly is_on_blocklist: boolean;
  constructor(readonly intel: IpIntel) {
    this.geo = new IpGeoVars(intel);
    this.as = new IpAsVars(intel);
    this.categories = [...(intel.categories ?? [])];
    this.is_on_blocklist = this.categories.some((c) => BLOCKLIST.test(c));
  }

  /** What the process's databases say of `ip` (nothing known: every field empty). */
  static of(ip: string): IpInfoVars {
    const intel = lookupIpIntel(ip);
    return intel ? new IpInfoVars(intel) : NOTHING_KNOWN;
  }
}

/** Without databases every address reads the same: one shared value, not four per request. */
const NOTHING_KNOWN = new IpInfoVars(Object.freeze({}));
Object.freeze(NOTHING_KNOWN.categories);

/** The fields of `conn.client_ip` that cel.ts reads from `conn.client_ip_info`. */
export const CLIENT_IP_INFO_FIELDS: ReadonlySet<string> = new Set([
  'geo',
  'as',
  'categories',
  'is_on_blocklist',
]);

/** Where the client is, when the ingress knows; else what IP intelligence says (`conn.geo`). */
export interface GeoInput {
  city?: string;
  country?: string;
  country_code?: string;
  latitude?: string;
  longitude?: string;
  radius?: string;
  subdivision?: string;
}

export class GeoVars {
  readonly #in: GeoInput;
  /** `input`, or what IP intelligence knows of the address (as text, as ngrok's conn.geo). */
  constructor(input: GeoInput | undefined, info?: () => IpInfoVars) {
    if (input) {
      this.#in = input;
      return;
    }
    const i = info?.().intel ?? {};
    const text = (n: number | undefined) => (n === undefined ? undefined : String(n));
    this.#in = {
      city: i.city,
      country: i.country,
      country_code: i.country_code,
      subdivision: i.subdivision,
      latitude: text(i.latitude),
      longitude: text(i.longitude),
      radius: text(i.radius),
    };
  }
  get city(): string {
    return this.#in.city ?? '';
  }
  get country(): string {
    return this.#in.country ?? '';
  }
  get country_code(): string {
    return this.#in.country_code ?? '';
  }
  get latitude(): string {
    return this.#in.latitude ?? '';
  }
  get longitude(): string {
    return this.#in.longitude ?? '';
  }
  get radius(): string {
    return this.#in.radius ?? '';
  }
  get subdivision(): string {
    return this.#in.subdivision ?? '';
  }
}
