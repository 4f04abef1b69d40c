import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BurrowError, CODES, NotFoundError } from '../core/errors.js';
import { ID_PREFIX } from '../core/ids.js';
import {
  parseScopes,
  RESOURCES,
  ROLES,
  roleWithin,
  SCOPES_MAX,
  scopesAllow,
  type Role,
} from '../core/roles.js';
import type { Principal } from './permissions.js';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Nullable } from './schemas.js';

const RoleSchema = Type.Union(ROLES.map((r) => Type.Literal(r)));
const ScopesSchema = Type.Array(Type.String({ maxLength: 64 }), { maxItems: SCOPES_MAX });

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  created_at: Type.String(),
  owner_id: Type.String(),
  role: Nullable(
    Type.String({
      description: "the key's role when narrower than its owner's; null: the owner's",
    }),
  ),
  scopes: Nullable(
    Type.Array(Type.String(), {
      description: 'the permissions the key is limited to, e.g. endpoints:write; null: every one',
    }),
  ),
  token: Nullable(
    Type.String({ description: 'the secret; only in the reply that created the key' }),
  ),
});

/** A create's fields this file checks before the store sees them. */
interface KeyCreateBody {
  owner_id?: unknown;
  role?: Role | null;
  scopes?: string[] | null;
}

/**
 * Who the new key belongs to. A bot user's key makes keys for that bot user only (a key it made
 * for the account would outlive the bot's deactivation, which is how an administrator ends its
 * keys); a non-admin makes keys for themself only (no keys of others).
 */
function checkOwner(request: FastifyRequest, principal: Principal, body: KeyCreateBody): void {
  const owner = principal.ownerId;
  const own = body.owner_id === undefined || body.owner_id === owner;
  if (own) {
    if (principal.role !== 'admin' || owner.startsWith(`${ID_PREFIX.botUser}_`)) {
      body.owner_id = owner;
    }
    return;
  }
  if (owner.startsWith(`${ID_PREFIX.botUser}_`)) {
    throw new BurrowError(
      CODES.apiKeyOwnOwner,
      403,
      `The API key ${request.apiKeyId} is owned by bot user ${owner} and may create API keys only for it (owner_id ${owner} or none). Use a key of the account or a dashboard session.`,
    );
  }
  if (principal.role !== 'admin') {
    throw new BurrowError(
      CODES.permissionDenied,
      403,
      `owner_id: a ${principal.role} creates API keys for themself only (${owner}, or leave owner_id out); an admin creates keys for others.`,
      { required: 'admin' },
    );
  }
}

/**
 * The new key's role and scopes, never wider than the creator's: a narrower role or scopes
 * asked for are kept; left out, the key gets the creator's key's own limits, so a limited key
 * cannot mint an unlimited one.
 */
function checkLimits(principal: Principal, body: KeyCreateBody): void {
  if (body.role === undefined || body.role === null) {
    body.role = principal.keyRole;
  } else if (!roleWithin(body.role, principal.role)) {
    throw new BurrowError(
      CODES.permissionDenied,
      403,
      `role: ${body.role} is wider than the creator's role (${principal.role}); a key carries its creator's role or a narrower one.`,
      { required: body.role, role: principal.role },
    );
  }
  if (body.scopes === undefined || body.scopes === null) {
    body.scopes = principal.scopes === null ? null : [...principal.scopes];
    return;
  }
  const scopes = parseScopes(body.scopes);
  const wider = scopes.find((scope) => !scopesAllow(principal.scopes, scope));
  if (wider !== undefined) {
    throw new BurrowError(
      CODES.permissionDenied,
      403,
      `scopes: ${wider} is outside the creator key's scopes (${principal.scopes?.join(', ') ?? ''}); a key's scopes are a part of its creator's.`,
      { required: wider, role: principal.role },
    );
  }
  body.scopes = scopes;
}

/**
 * `/api_keys`: keys for this API. The token is shown once; only its hash is kept. Admins see and
 * manage every key; operators and viewers see only their own (others' are 404), and operators
 * make keys for themselves only. A key's role and scopes are never wider than its creator's.
 */
export async function apiKeyRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  app.addHook('preHandler', async (request) => {
    const principal = request.access;
    if (principal === undefined) return;
    const route = request.routeOptions.url;
    if (route === '/api_keys/:id' && principal.role !== 'admin') {
      // Someone else's key is not there for a non-admin: 404, as for an unknown id.
      const { id } = request.params as { id: string };
      const key = await repos.apiKeys.get(id);
      if (key === undefined || key.owner_id !== principal.ownerId) throw new NotFoundError();
      return;
    }
    if (route !== '/api_keys' || request.method !== 'POST') return;
    const body = (request.body ?? {}) as KeyCreateBody;
    checkOwner(request, principal, body);
    checkLimits(principal, body);
    request.body = body;
  });
  registerCrud(
    app,
    {
      path: 'api_keys',
      listKey: 'keys',
      name: 'API key',
      tag: 'API keys',
      item: ApiKeySchema,
      createBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        owner_id: Type.Optional(
          Type.String({
            description: 'the account user (default), a dashboard user or a bot user id',
          }),
        ),
        role: Type.Optional(
          Nullable({
            ...RoleSchema,
            description: "a role narrower than the owner's (admin, operator, viewer)",
          }),
        ),
        scopes: Type.Optional(
          Nullable({
            ...ScopesSchema,
            description: `limit the key to these permissions: <resource>:read or <resource>:write, resource one of ${RESOURCES.join(', ')}`,
          }),
        ),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.apiKeys,
      createBodyOptional: true,
      listFor: (request, page) => {
        const principal = request.access;
        return principal && principal.role !== 'admin'
          ? repos.apiKeys.listOwnedBy(principal.ownerId, page)
          : repos.apiKeys.list(page);
      },
      view: (k) => ({ ...k, uri: uris.of(k.id) }),
    },
    uris.collection('api_keys'),
  );
}
