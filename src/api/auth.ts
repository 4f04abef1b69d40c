import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthenticationError, BurrowError, CODES, RateLimitError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import { SlidingWindowLimiter } from '../core/sliding-window.js';
import type { ApiKeyRepository } from '../store/api-keys.js';
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

/**
 * Version check, API-key authentication and per-key rate limiting, in that order, for every route
 * but the public ones.
 */
export function installAuth(
  app: FastifyInstance,
  apiKeys: ApiKeyRepository,
  rateLimit: { max: number; windowSeconds: number },
  sessions?: SessionAuth,
): void {
  const limiter =
    rateLimit.max > 0
      ? new SlidingWindowLimiter(rateLimit.max, rateLimit.windowSeconds * 1000)
      : undefined;
  app.decorateRequest('apiKeyId', undefined);
  app.addHook('onRequest', async (request) => {
    if (publicPath(request) || sessions?.isPublic(request)) return;
    checkVersion(request);
    const header = request.headers.authorization;
    // The dashboard: a signed-in person's session cookie stands in for an API key.
    if (!header && sessions && (await sessions.authenticate(request))) {
      const verdict = limiter?.take(request.userId!);
      if (verdict && !verdict.allowed)
        throw new RateLimitError(Math.ceil(verdict.retryAfterMs / 1000));
      return;
    }
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
    const key = await apiKeys.verify(m[1]!);
    if (!key) {
      throw new AuthenticationError(
        CODES.invalidApiKey,
        'The API key is invalid or has been deleted. Create a new one with `burrow api-key create`.',
      );
    }
    request.apiKeyId = key.id;
    if (limiter) {
      const verdict = limiter.take(key.id);
      if (!verdict.allowed) throw new RateLimitError(Math.ceil(verdict.retryAfterMs / 1000));
    }
  });
}
