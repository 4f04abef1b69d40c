/**
 * Dashboard sign-in: cookie sessions for people (store/users.ts), beside API keys.
 *
 * - `POST /auth/login`, `POST /auth/logout`, `GET /auth/session`, `GET /auth/setup/:token`,
 *   `POST /auth/setup` (the first user, with the one-time link printed at first start).
 * - The session cookie is HttpOnly, SameSite=Strict, and Secure when the API is reached over HTTPS.
 * - CSRF: every change made with a session cookie must carry `X-CSRF-Token` (a value derived from
 *   the session secret, which the page reads from `/auth/session`; another site can neither read
 *   it nor set custom headers cross-origin without CORS, which this API never grants), and an
 *   `Origin`, when sent, must be this API's own.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuthenticationError, BurrowError, CODES } from '../core/errors.js';
import { quote } from '../core/quote.js';
import { PASSWORD_MAX, USER_NAME_MAX, type User, type UserRepository } from '../store/users.js';
import { Body } from './schemas.js';
import { SignInLimits } from './sign-in-limits.js';

export const SESSION_COOKIE = 'burrow_session';
export const CSRF_HEADER = 'x-csrf-token';
/** A session ends this long after sign-in, whatever happens in between. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard user whose session cookie authenticated the request. */
    userId: string | undefined;
  }
}

/** The value of cookie `name` in a Cookie header, if present. */
function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The CSRF token of a session: derived, so nothing more is stored. */
function csrfTokenOf(sessionToken: string): string {
  return createHash('sha256').update(`burrow-csrf:${sessionToken}`).digest('base64url');
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function forbidden(message: string): BurrowError {
  return new BurrowError(CODES.csrfRefused, 403, message);
}

/** A cross-site request carries another site's Origin; refuse it before anything is changed. */
function checkOrigin(request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw forbidden(
      `The Origin header ${quote(origin)} is not a URL. Send the request from the dashboard, or use an API key.`,
    );
  }
  if (host !== request.headers.host) {
    throw forbidden(
      `Requests from ${quote(origin)} may not change anything here. Use the dashboard served by this API, or an API key.`,
    );
  }
}

/** Refuse a change made with session `secret` that lacks its CSRF token; `what` starts the message. */
function checkCsrf(request: FastifyRequest, secret: string, what: string): void {
  const header = request.headers[CSRF_HEADER];
  if (typeof header !== 'string' || !sameToken(header, csrfTokenOf(secret))) {
    throw forbidden(`${what} the ${CSRF_HEADER} header from GET /auth/session.`);
  }
}

/** The session secret of the request's cookie, if it has one. */
function sessionSecret(request: FastifyRequest): string | undefined {
  return readCookie(request.headers.cookie, SESSION_COOKIE);
}

/** The session layer auth.ts consults when a request has no Authorization header. */
export interface SessionAuth {
  /** Paths served without any authentication: sign-in itself and the dashboard's files. */
  isPublic(request: FastifyRequest): boolean;
  /** Authenticate by session cookie (setting `request.userId`); false when there is no cookie. */
  authenticate(request: FastifyRequest): Promise<boolean>;
}

/**
 * The session layer over `users`.
 * @example installAuth(app, repos, sessionAuth(repos.users));
 */
export function sessionAuth(users: UserRepository): SessionAuth {
  return {
    isPublic: (request) => {
      const path = request.url.split('?')[0] ?? '';
      return path === '/' || path.startsWith('/auth/') || path.startsWith('/dashboard/');
    },
    async authenticate(request) {
      const secret = sessionSecret(request);
      if (secret === undefined || secret === '') return false;
      const session = await users.session(secret);
      if (!session) {
        throw new AuthenticationError(
          CODES.sessionExpired,
          'Your dashboard session has ended. Sign in again.',
        );
      }
      if (UNSAFE.has(request.method)) {
        checkOrigin(request);
        checkCsrf(request, secret, 'Changes made with a dashboard session need');
      }
      request.userId = session.user.id;
      // The user's role, read with the session on every request: a new role holds at once.
      request.access = {
        ownerId: session.user.id,
        role: session.user.role,
        scopes: null,
        keyRole: null,
      };
      return true;
    },
  };
}

function sessionView(user: User, secret: string, expiresMs: number) {
  return {
    user: { id: user.id, name: user.name, role: user.role },
    csrf_token: csrfTokenOf(secret),
    expires_at: new Date(expiresMs).toISOString(),
  };
}

const SessionSchema = Type.Object({
  // The role tells the dashboard what to show (the API enforces it either way).
  user: Type.Object({ id: Type.String(), name: Type.String(), role: Type.String() }),
  csrf_token: Type.String(),
  expires_at: Type.String(),
});

/** Sign-in's fields, bounded by what store/users.ts accepts. */
const CREDENTIAL_FIELDS = {
  name: Type.String({ maxLength: USER_NAME_MAX }),
  password: Type.String({ maxLength: PASSWORD_MAX }),
};
const Credentials = Body(CREDENTIAL_FIELDS);
const SetupBody = Body({ token: Type.String({ maxLength: 128 }), ...CREDENTIAL_FIELDS });

/**
 * `/auth/*` routes, and API keys created with a session owned by the signed-in user.
 * @example await sessionRoutes(app, repos.users, { secureCookies: false });
 */
export async function sessionRoutes(
  fastify: FastifyInstance,
  users: UserRepository,
  options: { secureCookies: boolean },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const limits = new SignInLimits();
  app.decorateRequest('userId', undefined);

  const setCookie = (
    reply: FastifyReply,
    request: FastifyRequest,
    value: string,
    maxAge: number,
  ) => {
    const secure = options.secureCookies || request.protocol === 'https' ? '; Secure' : '';
    void reply.header(
      'set-cookie',
      `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure}`,
    );
  };
  const startSession = async (request: FastifyRequest, reply: FastifyReply, user: User) => {
    const { token, expiresMs } = await users.startSession(user.id, SESSION_TTL_MS);
    setCookie(reply, request, token, Math.floor(SESSION_TTL_MS / 1000));
    void users.pruneSessions().catch(() => undefined);
    return sessionView(user, token, expiresMs);
  };

  // Owner of keys made in the dashboard: the person who made them (unless the body names one).
  app.addHook('preHandler', async (request) => {
    if (request.userId === undefined || request.method !== 'POST') return;
    if (request.routeOptions.url !== '/api_keys') return;
    const body = request.body as { owner_id?: unknown } | undefined;
    if (body && body.owner_id === undefined) body.owner_id = request.userId;
  });

  const hide = { hide: true };
  app.get(
    '/auth/session',
    { schema: { ...hide, response: { 200: SessionSchema } } },
    async (request) => {
      const secret = sessionSecret(request);
      const session = secret ? await users.session(secret) : undefined;
      if (!secret || !session) {
        throw new AuthenticationError(CODES.sessionExpired, 'You are not signed in.');
      }
      return sessionView(session.user, secret, session.expiresMs);
    },
  );

  app.post(
    '/auth/login',
    { schema: { ...hide, body: Credentials, response: { 200: SessionSchema } } },
    async (request, reply) => {
      checkOrigin(request);
      const { name, password } = request.body;
      // Failures count per name and address: see sign-in-limits.ts (the error handler sets
      // Retry-After from a refusal).
      limits.admit(request.ip, name);
      const user = await users.authenticate(name, password);
      if (!user) {
        limits.failed(request.ip, name);
        throw new AuthenticationError(CODES.signInFailed, 'Wrong user name or password.');
      }
      limits.succeeded(request.ip, name);
      return startSession(request, reply, user);
    },
  );

  app.post('/auth/logout', { schema: hide }, async (request, reply) => {
    checkOrigin(request);
    const secret = sessionSecret(request);
    if (secret) {
      checkCsrf(request, secret, 'Signing out needs');
      await users.endSession(secret);
    }
    setCookie(reply, request, '', 0);
    return reply.status(204).send();
  });

  app.get(
    '/auth/setup/:token',
    { schema: { ...hide, params: Type.Object({ token: Type.String({ maxLength: 128 }) }) } },
    async (request) => ({
      valid: await users.setupTokenValid(request.params.token),
    }),
  );

  app.post(
    '/auth/setup',
    {
      schema: {
        ...hide,
        body: SetupBody,
        response: { 201: SessionSchema },
      },
    },
    async (request, reply) => {
      checkOrigin(request);
      const body = request.body;
      const user = await users.createFirstUser(body.token, body.name, body.password);
      if (!user) {
        throw new BurrowError(
          CODES.setupLinkInvalid,
          403,
          'This setup link has been used or has expired. Restart `burrow server` for a new one, or create a user with `burrow user add <name>`.',
        );
      }
      return reply.status(201).send(await startSession(request, reply, user));
    },
  );
}
