import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ConflictError, CODES } from '../core/errors.js';
import { ROLES, type Role } from '../core/roles.js';
import { PASSWORD_MAX, USER_NAME_MAX, type User, type UserRepository } from '../store/users.js';
import type { ApiContext } from './context.js';
import { found, registerDelete } from './crud.js';
import { Body, IdParams } from './schemas.js';

const RoleSchema = Type.Union(
  ROLES.map((r) => Type.Literal(r)),
  {
    description: 'admin (everything), operator (no users, no keys of others) or viewer (read only)',
  },
);

export const UserSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  name: Type.String(),
  role: Type.String(),
  created_at: Type.String(),
});

/**
 * Refuse a change that would leave no admin: `user` is about to stop being one (deleted, or given
 * another role). Checked before the change; two admins demoting each other at once could still
 * both pass, which `burrow user role` on the server mends.
 */
async function keepAnAdmin(users: UserRepository, user: User, nextRole?: Role): Promise<void> {
  if (user.role !== 'admin' || nextRole === 'admin') return;
  if ((await users.countWithRole('admin')) <= 1) {
    throw new ConflictError(
      CODES.lastAdmin,
      `${user.name} is the last admin: make another user admin first, so someone can still manage users.`,
    );
  }
}

/**
 * `/users`: the dashboard's users (people who sign in), for admins only (route-permissions.ts).
 * Passwords are write-only; a new role holds from the user's next request, for their sessions and
 * their API keys alike (auth.ts reads it on every request).
 * @example await userRoutes(app, ctx); // PATCH /users/usr_… {"role":"viewer"}
 */
export async function userRoutes(
  fastify: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const users = repos.users;
  const collectionUri = uris.collection('users');
  const view = (u: User) => ({ ...u, uri: `${collectionUri}/${u.id}` });
  const tags = ['Users'];

  app.post(
    '/users',
    {
      schema: {
        tags,
        summary: 'Create a dashboard user',
        body: Body({
          name: Type.String({ maxLength: USER_NAME_MAX }),
          password: Type.String({ maxLength: PASSWORD_MAX }),
          role: Type.Optional(RoleSchema),
        }),
        response: { 201: UserSchema },
      },
    },
    async (request, reply) => {
      const { name, password, role } = request.body;
      return reply.status(201).send(view(await users.create(name, password, role ?? 'viewer')));
    },
  );
  app.get(
    '/users',
    {
      schema: {
        tags,
        summary: 'List dashboard users',
        response: {
          200: Type.Object({ users: Type.Array(UserSchema), uri: Type.String() }),
        },
      },
    },
    async () => ({ users: (await users.list()).map(view), uri: collectionUri }),
  );
  app.get(
    '/users/:id',
    {
      schema: {
        tags,
        summary: 'Get a dashboard user',
        params: IdParams,
        response: { 200: UserSchema },
      },
    },
    async (request) => view(found(await users.get(request.params.id))),
  );
  app.patch(
    '/users/:id',
    {
      schema: {
        tags,
        summary: "Change a dashboard user's role",
        params: IdParams,
        body: Body({ role: Type.Optional(RoleSchema) }),
        response: { 200: UserSchema },
      },
    },
    async (request) => {
      const user = found(await users.get(request.params.id));
      const role = request.body.role;
      if (role === undefined || role === user.role) return view(user);
      await keepAnAdmin(users, user, role);
      return view(found(await users.setRole(user.id, role)));
    },
  );
  registerDelete(fastify, '/users/:id', tags, 'Delete a dashboard user', async (id) => {
    const user = await users.get(id);
    if (!user) return false;
    await keepAnAdmin(users, user);
    return users.delete(id);
  });
}
