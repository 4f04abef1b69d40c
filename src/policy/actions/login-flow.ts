import { createHash, randomBytes } from 'node:crypto';
import {
  cookieKey,
  cookiesNamed,
  parseCookies,
  seal,
  setCookie,
  unseal,
  withoutCookies,
  type RequestCookie,
} from './auth-cookies.js';
import { BurrowError, CODES } from '../../core/errors.js';
import { escapeHtml } from '../../core/html.js';
import { isMapping } from './config.js';
import type { LoginConfig } from './login-config.js';
import type { CompiledAction, PhaseContext, Terminal } from './types.js';

/**
 * The browser login both openid-connect and oauth run (they differ only in how they talk to the
 * identity provider, a {@link LoginProvider}):
 *
 * - a request without a valid session cookie is redirected to the provider (authorization code
 *   flow with PKCE S256, `state` and `nonce`); what the callback needs (state, nonce, code
 *   verifier, where to go back to) rides in a sealed cookie scoped to `/ngrok/`, not in memory,
 *   so any edge node can take the callback;
 * - `/ngrok/callback` checks the state against that cookie, lets the provider exchange the code,
 *   and sets the session cookie (sealed: identity, start, last use, end), then redirects back;
 * - a valid session sets `actions.ngrok.<result>.identity` and lets the request through, without
 *   the session cookie (the upstream never sees it);
 * - `/ngrok/login` starts a login explicitly, `/ngrok/logout` deletes the session cookie.
 *
 * Both cookies are AES-256-GCM under a key derived from the client secret (auth-cookies.ts): a
 * changed, forged or expired cookie is simply no session.
 */

const LOGIN_PATH = '/ngrok/login';
const LOGOUT_PATH = '/ngrok/logout';
const CALLBACK_PATH = '/ngrok/callback';

/** How long a started login may take before its callback is refused. */
const PENDING_MS = 10 * 60_000;

/** Who logged in, as the provider told. */
export interface Identity {
  /** The provider's id of the user (`sub`, or the user id for plain OAuth providers). */
  sub: string;
  email: string;
  name: string;
}

/** What a login needs from the identity provider. */
export interface LoginProvider {
  /** Where to send the browser to log in. */
  authorizationUrl(p: {
    redirectUri: string;
    state: string;
    nonce: string;
    codeChallenge: string;
    forceLogin: boolean;
  }): Promise<URL>;
  /** Exchange the code of `callbackUrl` and say who logged in; throws a {@link LoginError}. */
  finish(p: {
    callbackUrl: URL;
    redirectUri: string;
    state: string;
    nonce: string;
    codeVerifier: string;
  }): Promise<Identity>;
}

/**
 * A login that failed, with the status and the words the browser gets. 400 is the login's own
 * problem (`ERR_BURROW_LOGIN_REFUSED`: the provider refused it, start again); 502 the provider's
 * (`ERR_BURROW_LOGIN_PROVIDER`: unreachable, or an answer that cannot be used). `cause` is the
 * error of the provider or client library it reports, when there is one.
 * @example throw new LoginError(502, 'the identity provider sent no ID token');
 */
export class LoginError extends BurrowError {
  constructor(status: 400 | 502, message: string, options?: { cause?: unknown }) {
    const code = status === 400 ? CODES.loginRefused : CODES.loginProviderFailed;
    super(code, status, message, {}, options);
  }
}

/**
 * What a browser is told when the provider could not be reached or its answer could not be used,
 * whatever the reason: the provider's URL is the policy author's, so the reason (refused by the
 * egress guard, connection refused, not JSON, …) would tell what listens at an address the edge
 * reaches. The reason goes to the event (the operator's log and policy events).
 */
const PROVIDER_FAILED = `The identity provider could not be reached or its answer could not be used (${CODES.loginProviderFailed}).`;

/**
 * Whether `err` (or an error it wraps) is the network's: a system error (ECONNREFUSED, ENOTFOUND,
 * ETIMEDOUT, …, as fetch's `fetch failed` wraps it) or an aborted or timed-out request.
 * @example isNetworkError(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED', syscall: 'connect' } })) // true
 */
function isNetworkError(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const { name, code, syscall } = e as { name?: unknown; code?: unknown; syscall?: unknown };
    if (typeof syscall === 'string') return true;
    if (typeof code === 'string' && /^(E[A-Z]+|UND_ERR_\w+)$/.test(code)) return true;
    if (name === 'AbortError' || name === 'TimeoutError') return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

interface Session {
  sub: string;
  email: string;
  name: string;
  /** Started, last refreshed, ends (ms). */
  iat: number;
  seen: number;
  exp: number;
}

interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  back: string;
  exp: number;
}

/** A guard for what a sealed cookie holds: a mapping with these fields of these types. */
function shaped<T>(fields: Record<keyof T, 'string' | 'number'>): (v: unknown) => v is T {
  // Listed once: the guard runs on every request that carries a session cookie.
  const wanted = Object.entries(fields);
  return (v: unknown): v is T => isMapping(v) && wanted.every(([k, type]) => typeof v[k] === type);
}

const isSession = shaped<Session>({
  sub: 'string',
  email: 'string',
  name: 'string',
  iat: 'number',
  seen: 'number',
  exp: 'number',
});

const isPending = shaped<Pending>({
  state: 'string',
  nonce: 'string',
  verifier: 'string',
  back: 'string',
  exp: 'number',
});

const random = (): string => randomBytes(32).toString('base64url');

/** A path on this host to go back to, or undefined (no scheme-relative `//evil`, no control characters). */
export function safeReturnPath(path: string | undefined): string | undefined {
  if (path === undefined || !path.startsWith('/') || path.length > 2048) return undefined;
  if (path.startsWith('//')) return undefined;
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    // Control characters, spaces and backslashes (browsers read `/\\host` as `//host`).
    if (code <= 0x20 || code === 0x7f || code === 0x5c) return undefined;
  }
  return path;
}

/** A small HTML page saying what went wrong, with a way to start again. */
function page(status: number, title: string, text: string, headers: Record<string, string> = {}) {
  const body =
    `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>` +
    `<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>` +
    `<p><a href="/">Start again</a></p></body></html>\n`;
  return {
    kind: 'respond' as const,
    status,
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      ...headers,
    },
    body,
  };
}

const redirect = (location: string, cookie?: string): Terminal => ({
  kind: 'respond',
  status: 302,
  headers: {
    location,
    'cache-control': 'no-store',
    ...(cookie ? { 'set-cookie': cookie } : {}),
  },
  body: '',
});

/**
 * The compiled action of a login: `result` names the action result (`oidc`, `oauth`), `keyContext`
 * binds the cookie key to the action's provider and client.
 */
export function loginAction(
  cfg: LoginConfig,
  result: string,
  keyContext: string,
  provider: LoginProvider,
): CompiledAction {
  const key = cookieKey(cfg.clientSecret, `${keyContext}\n${cfg.clientId}\n${cfg.authId}`);
  const sessionName = `burrow_${cfg.authId}`;
  const pendingName = `burrow_${cfg.authId}_login`;
  const refreshAfter = Math.max(cfg.idleSessionMs / 4, 1000);

  const cookieOf = (c: PhaseContext, name: string, value: string, maxAgeMs: number, path = '/') =>
    setCookie(name, value, {
      path,
      maxAge: maxAgeMs / 1000,
      secure: c.activation.req!.url.scheme === 'https',
      domain: cfg.cookieDomain,
    });

  const session = (c: PhaseContext, cookies: readonly RequestCookie[]): Session | undefined => {
    const now = c.now();
    for (const value of cookiesNamed(cookies, sessionName)) {
      const s = unseal(key, sessionName, value);
      if (isSession(s) && s.exp > now && now - s.seen < cfg.idleSessionMs && s.iat <= now + 60_000)
        return s;
    }
    return undefined;
  };

  const sessionCookie = (c: PhaseContext, s: Session): string =>
    cookieOf(c, sessionName, seal(key, sessionName, s), s.exp - c.now());

  /** Redirect to the provider, remembering where to come back to. */
  const startLogin = async (c: PhaseContext, back: string, forceLogin: boolean) => {
    const state = `${cfg.authId}.${random()}`;
    const nonce = random();
    const verifier = random();
    const codeChallenge = createHash('sha256').update(verifier).digest('base64url');
    const redirectUri = `${c.activation.req!.url.origin}${CALLBACK_PATH}`;
    let url: URL;
    try {
      url = await provider.authorizationUrl({
        redirectUri,
        state,
        nonce,
        codeChallenge,
        forceLogin,
      });
    } catch (err) {
      const message = (err as Error).message;
      c.event('error', `login could not start: ${message}`, { code: CODES.loginProviderFailed });
      return page(502, 'Login unavailable', PROVIDER_FAILED);
    }
    for (const [name, value] of Object.entries(cfg.authzParams)) url.searchParams.set(name, value);
    const pending: Pending = { state, nonce, verifier, back, exp: c.now() + PENDING_MS };
    c.event('redirected', `login required: redirected to ${url.origin}${url.pathname}`, {
      location: `${url.origin}${url.pathname}`,
    });
    return redirect(
      url.href,
      cookieOf(c, pendingName, seal(key, pendingName, pending), PENDING_MS, '/ngrok/'),
    );
  };

  /** The first value of query parameter `name`. */
  const param = (c: PhaseContext, name: string): string | undefined =>
    c.activation.req!.url.query_params.get(name)?.[0];

  /** Whether a callback's state names another auth_id (another login action started it). */
  const othersCallback = (c: PhaseContext): boolean => {
    const state = param(c, 'state') ?? '';
    const dot = state.indexOf('.');
    return dot > 0 && state.slice(0, dot) !== cfg.authId;
  };

  const callback = async (
    c: PhaseContext,
    cookies: readonly RequestCookie[],
  ): Promise<Terminal> => {
    const req = c.activation.req!;
    const state = param(c, 'state') ?? '';
    let pending: Pending | undefined;
    for (const value of cookiesNamed(cookies, pendingName)) {
      const p = unseal(key, pendingName, value);
      if (isPending(p) && p.exp > c.now()) pending = p;
      if (pending?.state === state) break;
    }
    if (pending === undefined) {
      c.event('unauthorized', 'login callback without a pending login (cookie missing or expired)');
      return page(
        400,
        'Login failed',
        'This login was not started here or took too long (its cookie is missing or expired). Start again.',
      );
    }
    if (state === '' || pending.state !== state) {
      c.event('unauthorized', 'login callback with a state that does not match the pending login');
      return page(400, 'Login failed', 'The login state does not match: start again.');
    }
    const error = param(c, 'error');
    if (error !== undefined) {
      const description = param(c, 'error_description');
      const text = `The identity provider refused the login: ${error}${description ? ` (${description})` : ''}.`;
      c.event('unauthorized', text, { code: CODES.loginRefused });
      return page(error === 'access_denied' ? 403 : 400, 'Login refused', text);
    }
    const redirectUri = `${req.url.origin}${CALLBACK_PATH}`;
    let identity: Identity;
    try {
      identity = await provider.finish({
        callbackUrl: new URL(req.url.raw),
        redirectUri,
        state,
        nonce: pending.nonce,
        codeVerifier: pending.verifier,
      });
    } catch (err) {
      if (!(err instanceof LoginError) && !isNetworkError(err)) {
        // Neither the provider's answer nor the way to it (a bug): a failed login, no login code.
        const message = err instanceof Error ? err.message : String(err);
        c.event('unauthorized', `login failed: ${message}`);
        return page(502, 'Login failed', message);
      }
      const e =
        err instanceof LoginError
          ? err
          : new LoginError(502, (err as Error).message, { cause: err });
      c.event('unauthorized', `login failed: ${e.message}`, { code: e.code });
      return page(e.statusCode, 'Login failed', e.statusCode === 502 ? PROVIDER_FAILED : e.message);
    }
    const now = c.now();
    const s: Session = {
      sub: identity.sub.slice(0, 256),
      email: identity.email.slice(0, 256),
      name: identity.name.slice(0, 256),
      iat: now,
      seen: now,
      exp: now + cfg.maxSessionMs,
    };
    c.event('redirected', `logged in ${identity.email || identity.sub}`, {
      location: pending.back,
    });
    return redirect(pending.back, sessionCookie(c, s));
  };

  /** Whether this request is for this action (`?auth_id=` absent or ours). */
  const ours = (c: PhaseContext): boolean => {
    const wanted = param(c, 'auth_id');
    return wanted === undefined || wanted === cfg.authId;
  };

  const returnParam = (c: PhaseContext): string | undefined =>
    safeReturnPath(param(c, 'redirect_path'));

  return {
    alwaysTerminates: false,
    async run(c) {
      const req = c.activation.req!;
      const path = req.url.raw_path;
      if (
        cfg.allowCorsPreflight &&
        req.method === 'OPTIONS' &&
        req.header('origin').length > 0 &&
        req.header('access-control-request-method').length > 0
      ) {
        return undefined;
      }
      // Parsed once: read for the session (or pending login), then taken out for the upstream.
      const cookies = parseCookies(req.header('cookie'));
      // Another action's callback, login or logout is, for this one, an ordinary request: it
      // needs this action's session like any other.
      if (path === CALLBACK_PATH && !othersCallback(c)) return callback(c, cookies);
      if (path === LOGOUT_PATH && ours(c)) {
        const gone = cookieOf(c, sessionName, '', 0);
        c.event('responded', 'logged out');
        const to = returnParam(c);
        if (to !== undefined) return redirect(to, gone);
        return page(200, 'Logged out', 'You are logged out.', { 'set-cookie': gone });
      }
      if (path === LOGIN_PATH && ours(c)) return startLogin(c, returnParam(c) ?? '/', true);

      /** This request's path and query, to come back to after a login or a session refresh. */
      const back = (): string =>
        safeReturnPath(req.url.query === '' ? path : `${path}?${req.url.query}`) ?? '/';
      const s = session(c, cookies);
      if (s === undefined) return startLogin(c, back(), false);
      const now = c.now();
      const fetchMode = req.header('sec-fetch-mode');
      const navigation =
        (req.method === 'GET' || req.method === 'HEAD') &&
        (fetchMode[0] === 'navigate' ||
          (fetchMode.length === 0 && (req.header('accept')[0] ?? '').includes('text/html')));
      if (navigation && now - s.seen >= refreshAfter) {
        // The idle timeout counts from the last refresh; only a navigation can take a new cookie
        // on the way (the request goes on to the upstream otherwise), so it goes round once.
        return redirect(back(), sessionCookie(c, { ...s, seen: now }));
      }
      c.setActionResult(result, {
        identity: {
          email: s.email,
          name: s.name,
          sub: s.sub,
          provider_user_id: s.sub,
        },
        session: {
          started_at: new Date(s.iat).toISOString(),
          expires_at: new Date(s.exp).toISOString(),
        },
      });
      // The upstream gets the request without the action's cookies.
      if (req.header('cookie').length > 0) {
        const rest = withoutCookies(cookies, [sessionName, pendingName]);
        c.headers!.remove('cookie');
        if (rest !== '') c.headers!.add('cookie', rest);
        c.publishHeaders();
      }
      return undefined;
    },
  };
}
