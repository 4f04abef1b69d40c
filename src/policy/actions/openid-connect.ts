import { LRUCache } from 'lru-cache';
import * as oidc from 'openid-client';
import { egressFetch } from '../../core/egress-guard.js';
import { secureOrLoopbackUrl } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import { LOGIN_CONFIG_KEYS, readLoginConfig } from './login-config.js';
import { LoginError, loginAction, type Identity, type LoginProvider } from './login-flow.js';
import { authorizationUrl, exchangeCode, loginErrorOf } from './oidc-client.js';
import type { ActionSpec } from './types.js';

/**
 * How long a discovered provider (its metadata and signing keys) is reused before it is asked
 * again, how many are kept, how long a failed discovery is remembered (so a burst of logins
 * while the provider is down asks it once, not once each), and how long a call to the provider
 * may take. A failed exchange (502) drops the entry, so the next login asks again.
 */
const DISCOVERY_CACHE = {
  maxAgeMs: 3_600_000,
  maxEntries: 256,
  retryMs: 5_000,
  timeoutSeconds: 10,
};

const discovered = new LRUCache<string, Promise<oidc.Configuration>>({
  max: DISCOVERY_CACHE.maxEntries,
  ttl: DISCOVERY_CACHE.maxAgeMs,
});

/**
 * The client configuration of `issuer` for this client: `get` discovers it once (cached, shared
 * by every action with the same issuer and client, and by dashboard sign-in, src/api/dashboard-oidc.ts),
 * `forget` drops it so the next login asks again.
 */
export function discovery(issuer: URL, clientId: string, clientSecret: string) {
  const key = `${issuer.href}\n${clientId}\n${clientSecret}`;
  // Every call to the provider (discovery, keys, token, userinfo) goes through the egress guard.
  const options: oidc.DiscoveryRequestOptions = {
    timeout: DISCOVERY_CACHE.timeoutSeconds,
    [oidc.customFetch]: egressFetch,
    ...(issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : {}),
  };
  return {
    get(): Promise<oidc.Configuration> {
      const hit = discovered.get(key);
      if (hit) return hit;
      const config = oidc
        .discovery(issuer, clientId, clientSecret, undefined, options)
        .then((c) => {
          c.timeout = DISCOVERY_CACHE.timeoutSeconds;
          c[oidc.customFetch] = egressFetch;
          return c;
        });
      discovered.set(key, config);
      // A failure is remembered for retryMs only.
      config.catch(() => {
        if (discovered.get(key) === config) {
          discovered.set(key, config, { ttl: DISCOVERY_CACHE.retryMs });
        }
      });
      return config;
    },
    forget: (): void => void discovered.delete(key),
  };
}

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * `openid-connect`: log browsers in with an OpenID Connect provider (`issuer_url`, discovered at
 * `/.well-known/openid-configuration`) before the request goes on: authorization code flow with
 * PKCE, state and nonce; the ID token's signature, issuer, audience and nonce are checked; the
 * session is an encrypted cookie. Later rules see `actions.ngrok.oidc.identity.{email,name,sub}`.
 * See login-flow.ts for the flow and docs/traffic-policy.md for the keys.
 * @example { type: 'openid-connect', config: { issuer_url: 'https://id.example', client_id: 'app', client_secret: '…' } }
 */
export const openidConnectAction: ActionSpec = {
  type: 'openid-connect',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['issuer_url', ...LOGIN_CONFIG_KEYS],
  compile(config) {
    const issuerText = config.string('issuer_url', {
      required: true,
      example: '"https://accounts.example.com"',
    })!;
    const parsed = secureOrLoopbackUrl(issuerText, false);
    if (parsed === undefined) {
      return config.fail(
        'issuer_url',
        `must be an https URL without query (http only on loopback), not ${quote(issuerText, '"')}`,
      );
    }
    const issuer: URL = parsed;
    const cfg = readLoginConfig(config, 'oidc', ['openid', 'profile', 'email']);
    const client = discovery(issuer, cfg.clientId, cfg.clientSecret);
    const provider: LoginProvider = {
      async authorizationUrl(p) {
        const c = await client.get();
        return authorizationUrl(c, cfg.scopes, p, { nonce: true, prompt: 'login' });
      },
      async finish(p): Promise<Identity> {
        let c: oidc.Configuration;
        try {
          c = await client.get();
        } catch (err) {
          throw new LoginError(
            502,
            `the identity provider could not be reached: ${(err as Error).message}`,
            { cause: err },
          );
        }
        try {
          const tokens = await exchangeCode(c, p, 'required');
          const claims = tokens.claims();
          if (!claims) throw new LoginError(502, 'the identity provider sent no ID token');
          // An address the provider says it has not verified is no identity: a rule that allows
          // `@example.com` must not admit whoever typed that address at a self-service sign-up.
          let email = claims.email_verified === false ? '' : text(claims.email);
          let name = text(claims.name);
          if ((email === '' || name === '') && c.serverMetadata().userinfo_endpoint) {
            const info = await oidc.fetchUserInfo(c, tokens.access_token, claims.sub);
            email ||= info.email_verified === false ? '' : text(info.email);
            name ||= text(info.name);
          }
          return { sub: claims.sub, email, name };
        } catch (err) {
          const e = loginErrorOf(err);
          if (e.statusCode === 502) client.forget();
          throw e;
        }
      },
    };
    return loginAction(cfg, 'oidc', `openid-connect\n${issuer.href}`, provider);
  },
};
