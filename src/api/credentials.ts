import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Nullable } from './schemas.js';

export const Acl = Type.Array(Type.String(), {
  description:
    "bind rules: '*', 'bind:*', 'bind:<domain>', 'bind:*.<domain>', 'bind:<host>:<port>', 'bind:<key>=<value>' ('*' on either side), no bind rule permits every bind; and secrets grants: 'secrets:read:<vault name>' or 'secrets:read:*' let the token's policies read that vault (nothing else does)",
});

/** Who owns a new authtoken or SSH credential; it never changes. */
export const CredentialOwner = Type.String({
  description: 'the account user (default) or a bot user id',
});

/** What an update of an authtoken or an SSH credential may change. */
export const CredentialUpdateBody = Body({
  description: Type.Optional(Description),
  metadata: Type.Optional(Metadata),
  acl: Type.Optional(Acl),
});

export const CredentialSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  token: Nullable(
    Type.String({ description: 'the authtoken; only in the reply that created the credential' }),
  ),
  acl: Type.Array(Type.String()),
  owner_id: Type.String(),
});

/**
 * `/credentials`: authtokens agents connect with. The token is shown once; only its hash is kept.
 * @example await credentialRoutes(app, ctx);
 */
export async function credentialRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'credentials',
      listKey: 'credentials',
      name: 'credential',
      tag: 'Credentials',
      item: CredentialSchema,
      createBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        acl: Type.Optional(Acl),
        owner_id: Type.Optional(CredentialOwner),
      }),
      updateBody: CredentialUpdateBody,
      repo: repos.credentials,
      createBodyOptional: true,
      view: (c) => ({
        id: c.id,
        uri: uris.of(c.id),
        created_at: c.created_at,
        description: c.description,
        metadata: c.metadata,
        token: c.token,
        acl: c.acl,
        owner_id: c.owner_id,
      }),
    },
    uris.collection('credentials'),
  );
}
