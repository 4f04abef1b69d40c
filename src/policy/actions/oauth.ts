import * as oidc from 'openid-client';
import { egressFetch } from '../../core/egress-guard.js';
import type { OAUTH_APP_PROVIDERS } from '../../core/policy-data-options.js';
import { secureOrLoopbackUrl } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import { isMapping, type ConfigReader } from './config.js';
import { LOGIN_CONFIG_KEYS, readLoginConfig } from './login-config.js';
import { LoginError, loginAction, type Identity, type LoginProvider } from './login-flow.js';
import { authorizationUrl, exchangeCode, loginErrorOf } from './oidc-client.js';
import type { ActionSpec } from './types.js';

/** One OAuth provider the `oauth` action knows: its fixed endpoints and how to read the user. */
interface OAuthProvider {
  /** The server metadata openid-client needs (issuer names it; endpoints are fixed). */
  metadata: oidc.ServerMetadata;
  /** Scopes always asked for (the configured `scopes` are added). */
  scopes: readonly string[];
  /** True when the provider answers `openid` with an ID token Burrow can check (nonce sent). */
  openid: boolean;
  /** Where the user is read with the access token, and extra headers it wants. */
  user: { url: string; headers?: Record<string, string> };
  /** The user from the answers of `user.url` (and `emails`, for GitHub). */
  identity(user: Record<string, unknown>, emails: unknown): Identity;
  /** GitHub: the verified addresses, when the profile hides the email. */
  emails?: string;
}

const str = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '';

/** The userinfo's email unless the provider says it is not verified (then no identity email). */
const verifiedEmail = (u: Record<string, unknown>): string =>
  u.email_verified === false ? '' : str(u.email);

/** A provider that speaks OpenID: the user is its userinfo, the email only when verified. */
const openidProvider = (
  metadata: oidc.ServerMetadata & { userinfo_endpoint: string },
  scopes: readonly string[],
): OAuthProvider => ({
  metadata,
  scopes,
  openid: true,
  user: { url: metadata.userinfo_endpoint },
  identity: (u) => ({ sub: str(u.sub), email: verifiedEmail(u), name: str(u.name) }),
});

/**
 * The providers of ngrok's `oauth` action, with their documented endpoints: exactly those an
 * operator may register an app for (`--oauth-<provider>-client-id`), as the type checks.
 * @example OAUTH_PROVIDERS.github.metadata.authorization_endpoint // 'https://github.com/login/oauth/authorize'
 */
const OAUTH_PROVIDERS: Readonly<Record<(typeof OAUTH_APP_PROVIDERS)[number], OAuthProvider>> = {
  google: openidProvider(
    {
      issuer: 'https://accounts.google.com',
      authorization_endpoint: 'https://accounts.google.com/o/oauth2/v2/auth',
      token_endpoint: 'https://oauth2.googleapis.com/token',
      userinfo_endpoint: 'https://openidconnect.googleapis.com/v1/userinfo',
      jwks_uri: 'https://www.googleapis.com/oauth2/v3/certs',
    },
    ['openid', 'email', 'profile'],
  ),
  microsoft: {
    // The multi-tenant endpoint: its ID tokens name each tenant as issuer, so the user is read
    // from Microsoft Graph with the access token instead.
    metadata: {
      issuer: 'https://login.microsoftonline.com/common/v2.0',
      authorization_endpoint: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      token_endpoint: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
    },
    scopes: ['User.Read'],
    openid: false,
    user: { url: 'https://graph.microsoft.com/v1.0/me' },
    identity: (u) => ({
      sub: str(u.id),
      // Not `mail`: any tenant's admin sets it freely, so it could name someone else's address
      // (the "nOAuth" problem); a user principal name is on a domain the tenant verified.
      email: str(u.userPrincipalName),
      name: str(u.displayName),
    }),
  },
  github: {
    metadata: {
      issuer: 'https://github.com',
      authorization_endpoint: 'https://github.com/login/oauth/authorize',
      token_endpoint: 'https://github.com/login/oauth/access_token',
    },
    scopes: ['read:user', 'user:email'],
    openid: false,
    user: {
      url: 'https://api.github.com/user',
      headers: { accept: 'application/vnd.github+json' },
    },
    emails: 'https://api.github.com/user/emails',
    identity(u, emails) {
      let email = str(u.email);
      if (email === '' && Array.isArray(emails)) {
        const verified = (emails as unknown[]).filter((e) => isMapping(e) && e.verified === true);
        const primary = verified.find((e) => isMapping(e) && e.primary === true) ?? verified[0];
        email = isMapping(primary) ? str(primary.email) : '';
      }
      return { sub: str(u.id), email, name: str(u.name) || str(u.login) };
    },
  },
  gitlab: {
    metadata: {
      issuer: 'https://gitlab.com',
      authorization_endpoint: 'https://gitlab.com/oauth/authorize',
      token_endpoint: 'https://gitlab.com/oauth/token',
    },
    scopes: ['read_user'],
    openid: false,
    user: { url: 'https://gitlab.com/api/v4/user' },
    identity: (u) => ({
      sub: str(u.id),
      email: str(u.email),
      name: str(u.name) || str(u.username),
    }),
  },
  linkedin: openidProvider(
    {
      issuer: 'https://www.linkedin.com/oauth',
      authorization_endpoint: 'https://www.linkedin.com/oauth/v2/authorization',
      token_endpoint: 'https://www.linkedin.com/oauth/v2/accessToken',
      userinfo_endpoint: 'https://api.linkedin.com/v2/userinfo',
      jwks_uri: 'https://www.linkedin.com/oauth/openid/jwks',
    },
    ['openid', 'profile', 'email'],
  ),
  amazon: {
    metadata: {
      issuer: 'https://www.amazon.com',
      authorization_endpoint: 'https://www.amazon.com/ap/oa',
      token_endpoint: 'https://api.amazon.com/auth/o2/token',
    },
    scopes: ['profile'],
    openid: false,
    user: { url: 'https://api.amazon.com/user/profile' },
    identity: (u) => ({ sub: str(u.user_id), email: str(u.email), name: str(u.name) }),
  },
  facebook: {
    metadata: {
      issuer: 'https://www.facebook.com',
      authorization_endpoint: 'https://www.facebook.com/v19.0/dialog/oauth',
      token_endpoint: 'https://graph.facebook.com/v19.0/oauth/access_token',
    },
    scopes: ['public_profile', 'email'],
    openid: false,
    user: { url: 'https://graph.facebook.com/v19.0/me?fields=id,name,email' },
    identity: (u) => ({ sub: str(u.id), email: str(u.email), name: str(u.name) }),
  },
  twitch: {
    metadata: {
      issuer: 'https://id.twitch.tv/oauth2',
      authorization_endpoint: 'https://id.twitch.tv/oauth2/authorize',
      token_endpoint: 'https://id.twitch.tv/oauth2/token',
    },
    scopes: ['user:read:email'],
    openid: false,
    user: { url: 'https://api.twitch.tv/helix/users' },
    identity(u) {
      const first = Array.isArray(u.data) && isMapping(u.data[0]) ? u.data[0] : {};
      return {
        sub: str(first.id),
        email: str(first.email),
        name: str(first.display_name) || str(first.login),
      };
    },
  },
};

/** The config keys of `provider: custom`: the provider's OAuth 2.0 endpoints. */
const CUSTOM_ENDPOINT_KEYS = ['authorization_url', 'token_url', 'userinfo_url'] as const;

/** An https URL (http only on loopback, for tests and local providers) at `key`. */
function endpointUrl(config: ConfigReader, key: string): string {
  const text = config.string(key, {
    required: true,
    example: '"https://id.example/oauth/authorize"',
  })!;
  const url = secureOrLoopbackUrl(text, true);
  if (url === undefined) {
    return config.fail(
      key,
      `must be an https URL (http only on loopback), not ${quote(text, '"')}`,
    );
  }
  return url.href;
}

/**
 * `provider: custom`: any OAuth 2.0 provider by its endpoints (`authorization_url`, `token_url`,
 * `userinfo_url`). Who logged in is the user endpoint's `sub` (or `id`), `email` (unless
 * `email_verified` is false) and `name` (or `login`, `username`); no default scopes.
 */
function customProvider(config: ConfigReader): OAuthProvider {
  const authorization = endpointUrl(config, 'authorization_url');
  const token = endpointUrl(config, 'token_url');
  const userinfo = endpointUrl(config, 'userinfo_url');
  return {
    metadata: {
      issuer: new URL(authorization).origin,
      authorization_endpoint: authorization,
      token_endpoint: token,
    },
    scopes: [],
    openid: false,
    user: { url: userinfo },
    identity: (u) => ({
      sub: str(u.sub) || str(u.id),
      email: verifiedEmail(u),
      name: str(u.name) || str(u.login) || str(u.username),
    }),
  };
}

/**
 * The token answer, as openid-client should read it. Twitch sends `scope` as a list, which
 * OAuth 2 (and openid-client) wants as one space-separated string. A provider whose user is read
 * from its user API may also send an ID token when `openid` is among the scopes (ngrok lets a
 * policy ask for it); Burrow does not use it, and Microsoft's multi-tenant ones name another
 * issuer than the metadata's, so it is dropped rather than checked.
 */
const tokenFetchFor =
  (dropIdToken: boolean): oidc.CustomFetch =>
  async (url, options) => {
    // Through the egress guard, as every call a policy makes.
    const res = await egressFetch(url, options);
    if (!(res.headers.get('content-type') ?? '').includes('json')) return res;
    let json: unknown;
    try {
      json = await res.clone().json();
    } catch {
      return res; // Not JSON after all: openid-client says so.
    }
    if (!isMapping(json)) return res;
    const listScope = Array.isArray(json.scope);
    const idToken = dropIdToken && 'id_token' in json;
    if (!listScope && !idToken) return res;
    const fixed: Record<string, unknown> = { ...json };
    if (listScope) fixed.scope = (json.scope as unknown[]).join(' ');
    if (idToken) delete fixed.id_token;
    const headers = new Headers(res.headers);
    headers.delete('content-length');
    headers.delete('content-encoding');
    return new Response(JSON.stringify(fixed), {
      status: res.status,
      statusText: res.statusText,
      headers,
    });
  };

/** GET `url` with the access token; the parsed JSON, or a LoginError. */
async function readJson(
  config: oidc.Configuration,
  token: string,
  url: string,
  headers: Record<string, string>,
): Promise<unknown> {
  const res = await oidc.fetchProtectedResource(
    config,
    token,
    new URL(url),
    'GET',
    undefined,
    new Headers({ accept: 'application/json', 'user-agent': 'burrow', ...headers }),
  );
  if (!res.ok) throw new LoginError(502, `${url} answered ${res.status} when asked who logged in`);
  return res.json();
}

/**
 * `oauth`: log browsers in with one of the OAuth providers ngrok names (google, github, gitlab,
 * microsoft, linkedin, twitch, amazon, facebook), using your own OAuth app (`client_id`,
 * `client_secret`) or, without `client_id`, the app the operator configured for that provider
 * (`--oauth-<provider>-client-id`, as ngrok's managed apps). `openid` among the scopes is asked
 * for; the user is read from the provider's user API either way. The same flow as openid-connect (login-flow.ts); the user is read from the
 * provider's user API and set as `actions.ngrok.oauth.identity.{email,name,sub}`.
 * @example { type: 'oauth', config: { provider: 'github', client_id: 'Iv1.…', client_secret: '…' } }
 */
export const oauthAction: ActionSpec = {
  type: 'oauth',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['provider', ...CUSTOM_ENDPOINT_KEYS, ...LOGIN_CONFIG_KEYS],
  compile(config) {
    const name = config.string('provider', { required: true, example: '"google"' })!;
    const known: Readonly<Record<string, OAuthProvider>> = OAUTH_PROVIDERS;
    const p = name === 'custom' ? customProvider(config) : known[name];
    if (p === undefined || (name !== 'custom' && !Object.hasOwn(known, name))) {
      return config.fail(
        'provider',
        `must be one of ${Object.keys(OAUTH_PROVIDERS).join(', ')} or custom (any OAuth 2.0 provider by its endpoints), not ${quote(name, '"')}`,
      );
    }
    if (name !== 'custom') {
      for (const key of CUSTOM_ENDPOINT_KEYS) {
        if (config.has(key)) config.fail(key, 'is only for provider: custom');
      }
    }
    const cfg =
      name === 'custom'
        ? readLoginConfig(config, name, p.scopes)
        : readLoginConfig(config, name, p.scopes, name);
    const client = new oidc.Configuration(p.metadata, cfg.clientId, cfg.clientSecret);
    client.timeout = 10;
    client[oidc.customFetch] = tokenFetchFor(!p.openid);
    const provider: LoginProvider = {
      authorizationUrl(a) {
        const prompt = name === 'github' ? 'select_account' : 'login';
        return Promise.resolve(
          authorizationUrl(client, cfg.scopes, a, { nonce: p.openid, prompt }),
        );
      },
      async finish(a) {
        try {
          const tokens = await exchangeCode(client, a, p.openid ? 'if-sent' : 'none');
          const headers: Record<string, string> = { ...p.user.headers };
          if (name === 'twitch') headers['client-id'] = cfg.clientId;
          const user = await readJson(client, tokens.access_token, p.user.url, headers);
          if (!isMapping(user)) throw new LoginError(502, `${p.user.url} did not name the user`);
          let emails: unknown;
          if (p.emails && str(user.email) === '') {
            emails = await readJson(client, tokens.access_token, p.emails, headers).catch(
              () => undefined,
            );
          }
          const identity = p.identity(user, emails);
          if (identity.sub === '') throw new LoginError(502, `${p.user.url} did not name the user`);
          return identity;
        } catch (err) {
          throw loginErrorOf(err);
        }
      },
    };
    // A custom provider's cookies are keyed to its endpoints too, not only to its client id.
    const keyContext =
      name === 'custom' ? `oauth\ncustom\n${p.metadata.authorization_endpoint}` : `oauth\n${name}`;
    return loginAction(cfg, 'oauth', keyContext, provider);
  },
};
