import { hostnameProblem } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import type { ConfigReader } from './config.js';
import type { OAuthApp } from '../../core/policy-data-options.js';

/**
 * The config keys openid-connect and oauth share (client, scopes, session lengths, cookie
 * domain), checked when the policy compiles; the login itself is login-flow.ts.
 */

/** The config both login actions share, read by {@link readLoginConfig}. */
export interface LoginConfig {
  authId: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  authzParams: Record<string, string>;
  maxSessionMs: number;
  idleSessionMs: number;
  allowCorsPreflight: boolean;
  cookieDomain: string | undefined;
}

/** The config keys both login actions take. */
export const LOGIN_CONFIG_KEYS = [
  'auth_id',
  'client_id',
  'client_secret',
  'scopes',
  'authz_url_params',
  'max_session_duration',
  'idle_session_duration',
  'idle_session_timeout',
  'userinfo_refresh_interval',
  'allow_cors_preflight',
  'auth_cookie_domain',
];

/** Parameters the flow sets itself, so authz_url_params may not. */
const OWN_PARAMS = [
  'client_id',
  'redirect_uri',
  'response_type',
  'scope',
  'state',
  'nonce',
  'code_challenge',
  'code_challenge_method',
];

const DAY = 86_400_000;

/** The OAuth apps the operator registered once per provider (ngrok's managed apps). */
let managedApps: ReadonlyMap<string, OAuthApp> = new Map();

/**
 * Set the operator's OAuth apps by provider (`--oauth-<provider>-client-id/-secret`): an `oauth`
 * action without `client_id` uses its provider's. Policies compiled before keep what they had.
 * @example configureManagedOAuthApps({ google: { clientId: '…', clientSecret: '…' } })
 */
export function configureManagedOAuthApps(apps: Readonly<Record<string, OAuthApp>>): void {
  managedApps = new Map(Object.entries(apps));
}

/** The operator's app for `provider`, if any. */
export function managedOAuthApp(provider: string): OAuthApp | undefined {
  return managedApps.get(provider);
}

/**
 * Read the shared keys; `defaultScopes` go first, then `scopes` (added, as ngrok does). For an
 * oauth `provider`, a config without `client_id` uses the operator's app for it, if any.
 */
export function readLoginConfig(
  config: ConfigReader,
  defaultAuthId: string,
  defaultScopes: readonly string[],
  provider?: string,
): LoginConfig {
  const managed = provider === undefined ? undefined : managedOAuthApp(provider);
  const authId = config.string('auth_id') ?? defaultAuthId;
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(authId)) {
    config.fail('auth_id', 'must be 1 to 64 letters, digits, "-" or "_" (it names the cookie)');
  }
  const useManaged = managed !== undefined && !config.has('client_id');
  if (useManaged && config.has('client_secret')) {
    config.fail('client_secret', "needs client_id: without it the operator's app is used");
  }
  if (!useManaged && !config.has('client_id') && provider !== undefined) {
    config.fail(
      'client_id',
      `is required: this server has no OAuth app of its own for ${provider} (the operator sets one with --oauth-${provider}-client-id and --oauth-${provider}-client-secret)`,
    );
  }
  const clientId = useManaged
    ? managed.clientId
    : config.string('client_id', { required: true, example: '"my-app"' })!;
  if (clientId.trim() === '') config.fail('client_id', 'must not be empty');
  const clientSecret = useManaged ? managed.clientSecret : (config.string('client_secret') ?? '');
  if (clientSecret === '') {
    config.fail(
      'client_secret',
      'is required with client_id: the session cookies are encrypted with a key derived from it',
    );
  }
  const extra = config.stringList('scopes', { min: 0, max: 50 }) ?? [];
  extra.forEach((s, i) => {
    if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s)) {
      config.fail(`scopes[${i}]`, `must be a scope token without spaces, not ${quote(s, '"')}`);
    }
  });
  const scopes = [...new Set([...defaultScopes, ...extra])];
  const authzParams = config.stringMap('authz_url_params', { min: 0, max: 20 }) ?? {};
  for (const name of Object.keys(authzParams)) {
    if (OWN_PARAMS.includes(name)) {
      config.fail(`authz_url_params.${name}`, 'is set by the action itself and cannot be changed');
    }
  }
  const maxSessionMs =
    config.duration('max_session_duration', {
      min: 60_000,
      max: 90 * DAY,
      range: '1m to 2160h (90 days)',
      example: '"24h"',
    }) ?? DAY;
  if (config.has('idle_session_duration') && config.has('idle_session_timeout')) {
    config.fail(
      'idle_session_timeout',
      'cannot be set with idle_session_duration (the same thing)',
    );
  }
  const idleKey = config.has('idle_session_timeout')
    ? 'idle_session_timeout'
    : 'idle_session_duration';
  const idleSessionMs =
    config.duration(idleKey, {
      min: 60_000,
      max: 90 * DAY,
      range: '1m to 2160h (90 days)',
      example: '"12h"',
    }) ?? Math.min(12 * 3_600_000, maxSessionMs);
  if (config.has('userinfo_refresh_interval')) {
    config.fail(
      'userinfo_refresh_interval',
      'is not supported: the identity is read at login; shorten max_session_duration instead',
    );
  }
  const allowCorsPreflight = config.boolean('allow_cors_preflight') ?? false;
  const domain = config.string('auth_cookie_domain');
  const cookieDomain = domain?.replace(/^\./, '').toLowerCase();
  if (cookieDomain !== undefined && hostnameProblem(cookieDomain, false) !== undefined) {
    config.fail('auth_cookie_domain', `must be a domain name, not ${quote(domain!, '"')}`);
  }
  return {
    authId,
    clientId,
    clientSecret,
    scopes,
    authzParams,
    maxSessionMs,
    idleSessionMs,
    allowCorsPreflight,
    cookieDomain,
  };
}
