import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.js';
import type { SettingsRepository } from './settings.js';

/** The database or a transaction over it: helpers that take one run inside or outside a transaction. */
export type Db = Kysely<Database> | Transaction<Database>;

/** What the repositories need to know about the server they serve. */
export interface StoreSettings {
  /** Base domain of random names; reserved domains under it get no CNAME targets. */
  baseDomain: string;
  /** Host and port range of reserved TCP addresses. */
  tcpHost: string;
  tcpPorts: { first: number; last: number };
  /** Public port of the HTTPS/TLS ingress; TLS edge hostports use it. */
  httpsPort: number;
  /** Whether an ACME client orders certificates (decides what a new domain's status says). */
  acmeEnabled?: boolean | undefined;
}

/**
 * Checks a traffic policy document at save time and throws a ValidationError naming `field`.
 * The policy engine sits in a layer above the store, so whoever builds the repositories passes
 * it in (the CLI and the test helpers pass `validatePolicy` from src/policy).
 * @example const hooks: StoreHooks = { validateTrafficPolicy: validatePolicy };
 */
export type TrafficPolicyValidator = (text: string, protocol: 'tcp' | 'tls', field: string) => void;

/** What the layers above the store plug into it. */
export interface StoreHooks {
  /**
   * Full traffic policy validation (expressions, actions, phases). Without it the store only
   * checks that a policy is a JSON or YAML mapping, so real servers must always pass it.
   */
  validateTrafficPolicy?: TrafficPolicyValidator | undefined;
}

/** What every repository is built from. */
export interface RepoDeps extends StoreHooks {
  db: Kysely<Database>;
  settings: StoreSettings;
  /** Server-wide values, e.g. the account user id that owns keys and tokens by default. */
  accountSettings: SettingsRepository;
}
