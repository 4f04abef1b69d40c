/**
 * Server options that give traffic policies data of the operator's: MaxMind-format databases for
 * IP intelligence (`--geoip-city`, `--geoip-asn`, `--geoip-categories`) and OAuth apps per provider
 * (`--oauth-<provider>-client-id` / `-client-secret`, used by `oauth` actions without their own
 * `client_id`, as ngrok's managed apps). server-options.ts lists them; config.ts reads them here.
 */
import type { OptionSpec } from './server-options.js';

/** One option of this file, as server-options.ts lists it (its key is added there). */
type DataOptionSpec = Omit<OptionSpec, 'key'>;

/** The MaxMind-format files IP intelligence reads; '' for one not given. */
export interface GeoipFiles {
  city: string;
  asn: string;
  categories: string;
}

export const GEOIP_OPTIONS: readonly DataOptionSpec[] = [
  {
    name: 'geoip-city',
    description:
      'a GeoIP2/GeoLite2 City (or Country) database in MaxMind format: conn.client_ip.geo.location.* and conn.geo.* of traffic policies; re-read when the file changes',
    default: '',
  },
  {
    name: 'geoip-asn',
    description:
      'a GeoLite2 ASN database in MaxMind format: conn.client_ip.as.number and .organization of traffic policies; re-read when the file changes',
    default: '',
  },
  {
    name: 'geoip-categories',
    description:
      'a MaxMind-format database whose records hold a "categories" list of strings (e.g. proxy.anonymous.tor, blocklist.spamhaus): conn.client_ip.categories and is_on_blocklist; re-read when the file changes',
    default: '',
  },
];

/**
 * The `--geoip-*` files as given.
 * @example parseGeoipFiles((name, def) => def) // { city: '', asn: '', categories: '' }
 */
export function parseGeoipFiles(raw: (name: string, def: string) => string): GeoipFiles {
  return {
    city: raw('geoip-city', '').trim(),
    asn: raw('geoip-asn', '').trim(),
    categories: raw('geoip-categories', '').trim(),
  };
}

/** The providers an operator may register an app for: those of the `oauth` action. */
export const OAUTH_APP_PROVIDERS = [
  'google',
  'microsoft',
  'github',
  'gitlab',
  'linkedin',
  'twitch',
  'amazon',
  'facebook',
] as const;

export const OAUTH_APP_OPTIONS: readonly DataOptionSpec[] = OAUTH_APP_PROVIDERS.flatMap((p) => [
  {
    name: `oauth-${p}-client-id`,
    description: `the client id of the operator's ${p} OAuth app: oauth actions for ${p} without client_id use it (with --oauth-${p}-client-secret)`,
    default: '',
  },
  {
    name: `oauth-${p}-client-secret`,
    description: `the client secret of that ${p} app (prefer the environment variable or the config file to the flag)`,
    default: '',
  },
]);

/** An operator's OAuth app. */
export interface OAuthApp {
  clientId: string;
  clientSecret: string;
}

/**
 * The operator's apps by provider; an id without its secret (or the reverse) is refused.
 * @example parseOAuthApps(raw, fail) // { google: { clientId: '…', clientSecret: '…' } }
 */
export function parseOAuthApps(
  raw: (name: string, def: string) => string,
  fail: (name: string, rule: string) => Error,
): Record<string, OAuthApp> {
  const apps: Record<string, OAuthApp> = {};
  for (const p of OAUTH_APP_PROVIDERS) {
    const clientId = raw(`oauth-${p}-client-id`, '').trim();
    const clientSecret = raw(`oauth-${p}-client-secret`, '');
    if (clientId === '' && clientSecret === '') continue;
    if (clientId === '') {
      throw fail(`oauth-${p}-client-id`, `is required with --oauth-${p}-client-secret`);
    }
    if (clientSecret === '') {
      throw fail(`oauth-${p}-client-secret`, `is required with --oauth-${p}-client-id`);
    }
    apps[p] = { clientId, clientSecret };
  }
  return apps;
}
