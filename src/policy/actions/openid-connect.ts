import * as oidc from 'openid-client';
import { quote } from '../../core/quote.js';
import {
  LOGIN_CONFIG_KEYS,
  LoginError,
  loginAction,
  readLoginConfig,
  type Identity,
  type LoginProvider,
} from './login-flow.js';
import type { ActionSpec } from './types.js';

/**
 * How long a discovered provider (its metadata and signing keys) is reused before it is asked
 * again, how many are kept, how long a failed discovery is remembered (so a burst of logins
 * while the provider is down asks it once, not once each), and how long a call to the provider
 * may take. A failed exchange (502) drops the entry, so the next login asks again.
 */
export const DISCOVERY_CACHE = {
  maxAgeMs: 3_600_000,
  maxEntries: 256,
  retryMs: 5_000,
  timeoutSeconds: 10,
};

interface Discovered {
  config: Promise<oidc.Configuration>;
  at: number;
  failed: boolean;
}

const discovered = new Map<string, Discovered>();

/** Loopback issuers may speak plain http (a provider on the same machine, tests); others may not. */
function isLoopback(url: URL): boolean {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

/** The client configuration of `issuer` (discovered once, cached). */
function configuration(
  issuer: URL,
  clientId: string,
  clientSecret: string,
): Promise<oidc.Configuration> {
  const cacheKey = `${issuer.href}\n${clientId}\n${clientSecret}`;
  const hit = discovered.get(cacheKey);
  if (hit) {
    const age = Date.now() - hit.at;
    if (age < (hit.failed ? DISCOVERY_CACHE.retryMs : DISCOVERY_CACHE.maxAgeMs)) return hit.config;
  }
  const insecure = issuer.protocol === 'http:';
  const config = oidc
    .discovery(issuer, clientId, clientSecret, undefined, {
      timeout: DISCOVERY_CACHE.timeoutSeconds,
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
    })
    .then((c) => {
      c.timeout = DISCOVERY_CACHE.timeoutSeconds;
      return c;
    });
  const entry: Discovered = { config, at: Date.now(), failed: false };
  config.catch(() => {
    entry.failed = true;
    entry.at = Date.now();
  });
  discovered.delete(cacheKey);
  if (discovered.size >= DISCOVERY_CACHE.maxEntries) {
    discovered.delete(discovered.keys().next().value!);
  }
  discovered.set(cacheKey, entry);
  return config;
}

function forget(issuer: URL, clientId: string, clientSecret: string): void {
  discovered.delete(`${issuer.href}\n${clientId}\n${clientSecret}`);
}

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * Why openid-client refused, as a LoginError: the provider refusing the code (invalid_grant, …)
 * is the browser's problem (400); an unreachable or misbehaving provider is a 502.
 */
export function loginErrorOf(err: unknown): LoginError {
  if (err instanceof LoginError) return err;
  if (err instanceof oidc.ResponseBodyError) {
    const detail = err.error_description ? ` (${err.error_description})` : '';
    return new LoginError(
      err.status >= 500 ? 502 : 400,
      `the identity provider refused the code: ${err.error}${detail}`,
    );
  }
  if (err instanceof oidc.AuthorizationResponseError) {
    return new LoginError(400, `the identity provider refused the login: ${err.error}`);
  }
  const message = (err as Error)?.message ?? String(err);
  return new LoginError(502, `the identity provider's answer could not be used: ${message}`);
}

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
    const parsed = URL.canParse(issuerText) ? new URL(issuerText) : undefined;
    if (
      parsed === undefined ||
      !(parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopback(parsed))) ||
      parsed.search !== '' ||
      parsed.hash !== ''
    ) {
      return config.fail(
        'issuer_url',
        `must be an https URL without query (http only on loopback), not ${quote(issuerText, '"')}`,
      );
    }
    const issuer: URL = parsed;
    const cfg = readLoginConfig(config, 'oidc', ['openid', 'profile', 'email']);
    const { clientId, clientSecret } = cfg;
    const provider: LoginProvider = {
      async authorizationUrl(p) {
        const c = await configuration(issuer, clientId, clientSecret);
        return oidc.buildAuthorizationUrl(c, {
          redirect_uri: p.redirectUri,
          scope: cfg.scopes.join(' '),
          state: p.state,
          nonce: p.nonce,
          code_challenge: p.codeChallenge,
          code_challenge_method: 'S256',
          ...(p.forceLogin ? { prompt: 'login' } : {}),
        });
      },
      async finish(p): Promise<Identity> {
        let c: oidc.Configuration;
        try {
          c = await configuration(issuer, clientId, clientSecret);
        } catch (err) {
          throw new LoginError(
            502,
            `the identity provider could not be reached: ${(err as Error).message}`,
          );
        }
        try {
          const tokens = await oidc.authorizationCodeGrant(
            c,
            p.callbackUrl,
            {
              pkceCodeVerifier: p.codeVerifier,
              expectedState: p.state,
              expectedNonce: p.nonce,
              idTokenExpected: true,
            },
            { redirect_uri: p.redirectUri },
          );
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
          if (e.status === 502) forget(issuer, clientId, clientSecret);
          throw e;
        }
      },
    };
    return loginAction(cfg, 'oidc', `openid-connect\n${issuer.href}`, provider);
  },
};
