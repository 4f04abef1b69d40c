import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
import { ID_PREFIX } from '../core/ids.js';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Nullable } from './schemas.js';

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  created_at: Type.String(),
  owner_id: Type.String(),
  token: Nullable(
    Type.String({ description: 'the secret; only in the reply that created the key' }),
  ),
});

/**
 * `/api_keys`: keys for this API. The token is shown once; only its hash is kept. A key owned by
 * a bot user makes keys owned by that bot user only (the default for it): a key it made for the
 * account would outlive the bot's deactivation, which is how an administrator ends its keys.
 */
export async function apiKeyRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  app.addHook('preHandler', async (request) => {
    const owner = request.apiKeyOwnerId;
    if (
      request.method !== 'POST' ||
      owner === undefined ||
      !owner.startsWith(`${ID_PREFIX.botUser}_`)
    )
      return;
    if (request.routeOptions.url !== '/api_keys') return;
    const body = request.body as { owner_id?: unknown } | undefined;
    if (body === undefined || body.owner_id === undefined) {
      if (body) body.owner_id = owner;
      return;
    }
    if (body.owner_id !== owner) {
      throw new BurrowError(
        CODES.apiKeyOwnOwner,
        403,
        `The API key ${request.apiKeyId} is owned by bot user ${owner} and may create API keys only for it (owner_id ${owner} or none). Use a key of the account or a dashboard session.`,
      );
    }
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
          Type.String({ description: 'the account user (default) or a bot user id' }),
        ),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.apiKeys,
      createBodyOptional: true,
      view: (k) => ({ ...k, uri: uris.of(k.id) }),
    },
    uris.collection('api_keys'),
  );
}
