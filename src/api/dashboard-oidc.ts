/**
 * Dashboard sign-in with OpenID Connect (`--dashboard-oidc-*`), beside passwords: the same
 * discovery (through the egress guard), PKCE, state and nonce checks as the `openid-connect`
 * policy action (src/policy/actions/openid-connect.ts, oidc-client.ts).
 *
 * - `GET /auth/oidc/start` sends the browser to the provider; the state, nonce and PKCE verifier
 *   wait in a cookie of this API only (`burrow_oidc`, HttpOnly, SameSite=Lax so that it comes
 *   back with the provider's redirect, Path=/auth/oidc, 10 minutes), so any node of a cluster can
 *   finish the sign-in.
 * - `GET /auth/oidc/callback` exchanges the code, checks the ID token (signature, issuer,
 *   audience, nonce), admits the person only when a verified email or the groups claim matches
 *   an allow rule, finds or makes the user (first sign-in: the default role, or the role their
 *   groups give; with role groups set, the role follows the groups at each sign-in), starts the
 *   ordinary session and sends the browser to the dashboard. A refusal goes back to the sign-in
 *   page with the reason.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as oidc from 'openid-client';
import type { DashboardOidcConfig } from '../core/dashboard-oidc-options.js';
import type { Role } from '../core/roles.js';
import { USER_NAME_MAX, type UserRepository } from '../store/users.js';
import { discovery } from '../policy/actions/openid-connect.js';
import { authorizationUrl, exchangeCode, loginErrorOf } from '../policy/actions/oidc-client.js';
import { SESSION_COOKIE, SESSION_TTL_MS } from './sessions.js';

const PENDING_COOKIE = 'burrow_oidc';
const PENDING_MAX_AGE_S = 600;
const SCOPES = ['openid', 'email', 'profile'];

/** The value of cookie `name` in a Cookie header, if present. */
function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A refusal the person sees on the sign-in page. */
class SignInRefused extends Error {}

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The groups a claim lists: an array of strings, or one string. */
function groupsOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((g): g is string => typeof g === 'string');
  return typeof value === 'string' ? [value] : [];
}

/** Whether the verified `email` or `groups` match an allow rule. */
export function admitted(config: DashboardOidcConfig, email: string, groups: string[]): boolean {
  const lower = email.toLowerCase();
  if (lower !== '' && config.allowedEmails.includes(lower)) return true;
  const domain = lower.includes('@') ? lower.slice(lower.lastIndexOf('@') + 1) : '';
  if (domain !== '' && config.allowedDomains.includes(domain)) return true;
  return groups.some((g) => config.allowedGroups.includes(g));
}

/** The role groups give (admin before operator), or undefined when no role group names them. */
export function roleOfGroups(config: DashboardOidcConfig, groups: string[]): Role | undefined {
  if (groups.some((g) => config.adminGroups.includes(g))) return 'admin';
  if (groups.some((g) => config.operatorGroups.includes(g))) return 'operator';
  return undefined;
}

/** A user name from an email (what people recognise), kept to the names sign-in accepts. */
function userName(email: string, sub: string): string {
  const base = (email || `oidc-${sub}`)
    .replace(/[^A-Za-z0-9._@-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '');
  return (base || 'oidc-user').slice(0, USER_NAME_MAX);
}

/**
 * `GET /auth/methods`: how the sign-in page offers to sign in (`{"password": true, "oidc": …}`).
 * @example await signInMethodsRoute(app, config.dashboardOidc !== undefined);
 */
export async function signInMethodsRoute(
  app: FastifyInstance,
  oidcEnabled: boolean,
): Promise<void> {
  app.get('/auth/methods', { schema: { hide: true } }, async () => ({
    password: true,
    oidc: oidcEnabled,
  }));
}

/**
 * Register `/auth/oidc/start` and `/auth/oidc/callback` (public routes: sessions.ts serves
 * `/auth/*` without a key).
 * @example await dashboardOidcRoutes(app, repos.users, config.dashboardOidc, { publicApiUrl, secureCookies: false });
 */
export async function dashboardOidcRoutes(
  app: FastifyInstance,
  users: UserRepository,
  config: DashboardOidcConfig,
  options: { publicApiUrl: string; secureCookies: boolean },
): Promise<void> {
  const client = discovery(config.issuer, config.clientId, config.clientSecret);
  const redirectUri = `${options.publicApiUrl.replace(/\/$/, '')}/auth/oidc/callback`;
  const secure = (request: FastifyRequest) =>
    options.secureCookies || request.protocol === 'https' ? '; Secure' : '';
  const pendingCookie = (request: FastifyRequest, value: string, maxAge: number) =>
    `${PENDING_COOKIE}=${value}; Path=/auth/oidc; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${secure(request)}`;
  const backToSignIn = (reply: FastifyReply, reason: string) =>
    reply.redirect(`/#/signin-error/${encodeURIComponent(reason)}`, 303);

  app.get('/auth/oidc/start', { schema: { hide: true } }, async (request, reply) => {
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const verifier = oidc.randomPKCECodeVerifier();
    let url: URL;
    try {
      url = authorizationUrl(
        await client.get(),
        SCOPES,
        {
          redirectUri,
          state,
          nonce,
          codeChallenge: await oidc.calculatePKCECodeChallenge(verifier),
          forceLogin: false,
        },
        { nonce: true, prompt: 'login' },
      );
    } catch (err) {
      request.log.warn({ err }, 'dashboard sign-in: the identity provider could not be reached');
      return backToSignIn(reply, 'The identity provider could not be reached. Try again later.');
    }
    void reply.header(
      'set-cookie',
      pendingCookie(request, `${state}.${nonce}.${verifier}`, PENDING_MAX_AGE_S),
    );
    return reply.redirect(url.href, 302);
  });

  app.get('/auth/oidc/callback', { schema: { hide: true } }, async (request, reply) => {
    const pending = cookieValue(request.headers.cookie, PENDING_COOKIE)?.split('.');
    // The pending sign-in is spent whatever happens next.
    void reply.header('set-cookie', pendingCookie(request, '', 0));
    try {
      if (pending?.length !== 3) {
        throw new SignInRefused(
          'This sign-in was not started here, or took too long. Start again.',
        );
      }
      const [state, nonce, codeVerifier] = pending as [string, string, string];
      const c = await client.get();
      const tokens = await exchangeCode(
        c,
        { callbackUrl: new URL(request.url, redirectUri), redirectUri, state, nonce, codeVerifier },
        'required',
      ).catch((err: unknown) => {
        const e = loginErrorOf(err);
        if (e.statusCode === 502) client.forget();
        throw new SignInRefused(`Sign-in failed: ${e.message}.`);
      });
      const claims = tokens.claims();
      if (!claims)
        throw new SignInRefused('Sign-in failed: the identity provider sent no ID token.');
      // An address the provider has not verified is no identity.
      let email = claims.email_verified === false ? '' : text(claims.email);
      let groups = groupsOf(claims[config.groupsClaim]);
      // Many providers put the email and groups in the userinfo answer only, as the action reads.
      if ((email === '' || groups.length === 0) && c.serverMetadata().userinfo_endpoint) {
        const info = await oidc.fetchUserInfo(c, tokens.access_token, claims.sub);
        email ||= info.email_verified === false ? '' : text(info.email);
        if (groups.length === 0) groups = groupsOf(info[config.groupsClaim]);
      }
      if (!admitted(config, email, groups)) {
        request.log.info(
          { sub: claims.sub, email },
          'dashboard sign-in refused: no allow rule matches',
        );
        throw new SignInRefused(
          `${email || claims.sub} may not sign in here: ask an administrator to allow your address or group.`,
        );
      }
      const groupRole = roleOfGroups(config, groups);
      const roleGroupsSet = config.adminGroups.length + config.operatorGroups.length > 0;
      const user = await users.signInWithOidc(
        `${config.issuer.href} ${claims.sub}`,
        userName(email, claims.sub),
        groupRole ?? config.defaultRole,
        roleGroupsSet,
      );
      const session = await users.startSession(user.id, SESSION_TTL_MS);
      void reply.header('set-cookie', [
        pendingCookie(request, '', 0),
        `${SESSION_COOKIE}=${session.token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(SESSION_TTL_MS / 1000)}${secure(request)}`,
      ]);
      return reply.redirect('/#/overview', 303);
    } catch (err) {
      if (err instanceof SignInRefused) return backToSignIn(reply, err.message);
      if (err instanceof Error && 'code' in err && typeof err.message === 'string') {
        return backToSignIn(reply, err.message);
      }
      throw err;
    }
  });
}
