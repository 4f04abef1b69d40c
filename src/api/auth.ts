import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthenticationError, BurrowError, CODES, RateLimitError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import { ID_PREFIX } from '../core/ids.js';
import type { VerifiedApiKey } from '../store/api-keys.js';
import type { Repositories } from '../store/index.js';
import type { Role } from '../core/roles.js';
import { keyPrincipal } from './permissions.js';
import type { SessionAuth } from './sessions.js';

export const SUPPORTED_VERSIONS = ['2'];

/** Paths served without version header or key: the API description, health and metrics. */
const PUBLIC_PATHS = new Set(['/openapi.json', '/healthz', '/metrics']);

function publicPath(request: FastifyRequest): boolean {
  return PUBLIC_PATHS.has(request.url.split('?')[0] ?? '');
}

/** Check `Service-Version` (or its alias `Ngrok-Version`): missing 218, unsupported 217. */
export function checkVersion(request: FastifyRequest): void {
  const header = request.headers['service-version'] ?? request.headers['ngrok-version'];
  const version = Array.isArray(header) ? header[0] : header;
  if (version === undefined || version === '') {
    throw new BurrowError(
      CODES.missingVersion,
      400,
      `Your request has not specified an API version. Include the version you wish to use in the Service-Version header (Ngrok-Version is accepted too). Supported versions: ${SUPPORTED_VERSIONS.join(', ')}.`,
    );
  }
  if (!SUPPORTED_VERSIONS.includes(version.trim())) {
    throw new BurrowError(
      CODES.unsupportedVersion,
      400,
      `The provided API version ${quote(version)} is invalid or unsupported. Supported versions: ${SUPPORTED_VERSIONS.join(', ')}.`,
    );
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    operationId: string;
    /** The API key that authenticated the request. */
    apiKeyId: string | undefined;
  }
}

/** What API-key authentication reads: the keys (with their owners' rows), the account's user. */
export type KeyOwnerRepositories = Pick<Repositories, 'apiKeys' | 'settings'>;

/**
 * The role the owner of a key gives it, or why the owner no longer lets it in: a bot user that was
 * deactivated or deleted, a dashboard user who was deleted. The owner's row is read with the key
 * (`verify`, one query) on every request, so a change made through any node of a cluster (a
 * deactivation, a user's new role) holds at once on every node. The account's user and bot users
 * are admins (a key can be narrower).
 */
async function ownerState(
  key: VerifiedApiKey,
  accountUserId: () => Promise<string>,
): Promise<{ role: Role } | { gone: string }> {
  const { owner, owner_id: ownerId } = key;
  if (owner?.kind === 'bot') {
    return owner.active
      ? { role: 'admin' }
      : { gone: `its owner, bot user ${ownerId}, is deactivated (active: false)` };
  }
  if (ownerId.startsWith(`${ID_PREFIX.botUser}_`)) {
    return { gone: `its owner, bot user ${ownerId}, has been deleted` };
  }
  if (ownerId === (await accountUserId())) return { role: 'admin' };
  if (owner?.kind === 'user') return { role: owner.role };
  return { gone: `its owner, user ${ownerId}, has been deleted` };
}

/**
 * Version check and API-key (or dashboard session) authentication, in that order, for every route
 * but the public ones. {@link installRateLimit} then limits what each key may do. A key ends with
 * its owner: a deactivated or deleted bot user's keys, and a deleted dashboard user's, are refused.
 * It sets `request.access` (the role and scopes), which permissions.ts checks against the route.
 * @example installAuth(app, repos, sessionAuth(repos.users));
 */
export function installAuth(
  app: FastifyInstance,
  repos: KeyOwnerRepositories,
  sessions?: SessionAuth,
): void {
  app.decorateRequest('apiKeyId', undefined);
  // The account's user id never changes once made: read once.
  let account: Promise<string> | undefined;
  const accountUserId = (): Promise<string> => {
    if (account === undefined) {
      account = repos.settings.accountUserId();
      // A failed read (the store down) is not remembered.
      void account.catch(() => (account = undefined));
    }
    return account;
  };
  app.addHook('onRequest', async (request) => {
    if (publicPath(request) || sessions?.isPublic(request)) return;
    checkVersion(request);
    const header = request.headers.authorization;
    // The dashboard: a signed-in person's session cookie stands in for an API key.
    if (!header && sessions && (await sessions.authenticate(request))) return;
    if (!header) {
      throw new AuthenticationError(
        CODES.missingAuth,
        'Your request is missing the Authorization header. Send Authorization: Bearer <API key>; create a key with `burrow api-key create`.',
      );
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) {
      throw new AuthenticationError(
        CODES.malformedAuth,
        'The Authorization header must have the form: Bearer <API key>.',
      );
    }
    const key = await repos.apiKeys.verify(m[1]!);
    if (!key) {
      throw new AuthenticationError(
        CODES.invalidApiKey,
        'The API key is invalid or has been deleted. Create a new one with `burrow api-key create`.',
      );
    }
    const owner = await ownerState(key, accountUserId);
    if ('gone' in owner) {
      throw new AuthenticationError(
        CODES.apiKeyOwnerInactive,
        `The API key ${key.id} is refused: ${owner.gone}. An administrator can re-activate the bot user, or create a new key.`,
      );
    }
    request.apiKeyId = key.id;
    // What the key may do: permissions.ts checks it against the route next.
    request.access = keyPrincipal(key.owner_id, owner.role, key);
  });
}

/** Rate-limit buckets kept at once; past it the least recently used key's count is forgotten. */
const RATE_LIMIT_KEYS = 100_000;

/**
 * Per-key rate limiting (`--api-rate-limit`, `max` per `windowSeconds`; `max` 0 turns it off) with
 * @fastify/rate-limit: `max` requests per fixed window for each API key, or for each signed-in
 * person on the dashboard. Requests without either (the public paths) are not counted. Runs after
 * {@link installAuth}'s hook, which names the key; over the limit the answer is 429 ERR_NGROK_226
 * with Retry-After, through the error handler like every other error. Covers the not-found
 * handler too, since the hook is the app's own rather than each route's.
 * @example await installRateLimit(app, { max: 1200, windowSeconds: 60 });
 */
export async function installRateLimit(
  app: FastifyInstance,
  rateLimit: { max: number; windowSeconds: number },
): Promise<void> {
  if (rateLimit.max <= 0) return;
  await app.register(fastifyRateLimit, {
    global: false,
    max: rateLimit.max,
    timeWindow: rateLimit.windowSeconds * 1000,
    cache: RATE_LIMIT_KEYS,
    keyGenerator: (request) => request.apiKeyId ?? request.userId ?? '',
    allowList: (_request, key) => key === '',
    // Only Retry-After, which the error handler sets from the RateLimitError.
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
    addHeaders: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
      'retry-after': false,
    },
    errorResponseBuilder: (_request, context) =>
      new RateLimitError(Math.max(1, Math.ceil(context.ttl / 1000))),
  });
  app.addHook('onRequest', app.rateLimit());
}
