import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
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

/** `/api_keys`: keys for this API. The token is shown once; only its hash is kept. */
export async function apiKeyRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
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
