import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import type { SettingsRepository } from './settings.js';

/** What the repositories need to know about the server they serve. */
export interface StoreSettings {
  /** Base domain of random names; reserved domains under it get no CNAME targets. */
  baseDomain: string;
  /** Host and port range of reserved TCP addresses. */
  tcpHost: string;
  tcpPorts: { first: number; last: number };
  /** Public port of the HTTPS/TLS ingress; TLS edge hostports use it. */
  httpsPort: number;
}

/** What every repository is built from. */
export interface RepoDeps {
  db: Kysely<Database>;
  settings: StoreSettings;
  /** Server-wide values, e.g. the account user id that owns keys and tokens by default. */
  accountSettings: SettingsRepository;
}
