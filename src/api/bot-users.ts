import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
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

/**
 * `/bot_users`: users that belong to no person and can own authtokens and API keys. A key owned
 * by a bot user may not change that bot user's `active`: deactivation is how an administrator
 * ends the bot's keys, so the bot must not be able to undo it (or race it).
 */
export async function botUserRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  app.addHook('preHandler', async (request) => {
    if (request.method !== 'PATCH' || request.apiKeyId === undefined) return;
    if (request.routeOptions.url !== '/bot_users/:id') return;
    const { id } = request.params as { id?: string };
    const body = request.body as { active?: unknown } | undefined;
    // The key's owner (permissions.ts): a bot user's id when the bot's own key asks.
    if (id === request.access?.ownerId && body?.active !== undefined) {
      throw new BurrowError(
        CODES.apiKeyOwnOwner,
        403,
        `The API key ${request.apiKeyId} is owned by bot user ${id} and may not change its active field. Use a key of the account or a dashboard session.`,
      );
    }
  });
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
