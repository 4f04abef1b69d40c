import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Name } from './schemas.js';

export const BotUserSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  name: Type.String(),
  active: Type.Boolean(),
  created_at: Type.String(),
});

/** `/bot_users`: users that belong to no person and can own authtokens. */
export async function botUserRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'bot_users',
      listKey: 'bot_users',
      name: 'bot user',
      tag: 'Bot users',
      item: BotUserSchema,
      createBody: Body({
        name: Name('unique, non-empty name'),
        active: Type.Optional(
          Type.Boolean({ description: 'false refuses the bot user’s authtokens; default true' }),
        ),
      }),
      updateBody: Body({
        name: Type.Optional(Name('unique, non-empty name')),
        active: Type.Optional(Type.Boolean()),
      }),
      repo: repos.botUsers,
      view: (b) => ({
        id: b.id,
        uri: uris.of(b.id),
        name: b.name,
        active: b.active,
        created_at: b.created_at,
      }),
    },
    uris.collection('bot_users'),
  );
}
