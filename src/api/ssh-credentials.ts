import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Acl, CredentialOwner, CredentialUpdateBody } from './credentials.js';
import { Body, Description, Metadata } from './schemas.js';

export const SshCredentialSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  public_key: Type.String({ description: 'the OpenSSH public key, "<type> <base64>"' }),
  fingerprint: Type.String({ description: "SHA256 fingerprint, as 'ssh-keygen -lf' prints it" }),
  acl: Type.Array(Type.String()),
  owner_id: Type.String(),
});

/**
 * `/ssh_credentials`: public keys that open tunnels with `ssh -R` on the SSH listener
 * (docs/ssh.md). The same owners and ACL rules as authtokens (`/credentials`); the key is given
 * once, at creation, and never changes.
 * @example await sshCredentialRoutes(app, ctx);
 */
export async function sshCredentialRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'ssh_credentials',
      listKey: 'ssh_credentials',
      name: 'SSH credential',
      tag: 'SSH Credentials',
      item: SshCredentialSchema,
      createBody: Body({
        public_key: Type.String({
          description:
            'an OpenSSH public key line (the contents of id_ed25519.pub): ed25519, ECDSA, or RSA of at least 2048 bits',
        }),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        acl: Type.Optional(Acl),
        owner_id: Type.Optional(CredentialOwner),
      }),
      updateBody: CredentialUpdateBody,
      repo: repos.sshCredentials,
      view: (c) => ({
        id: c.id,
        uri: uris.of(c.id),
        created_at: c.created_at,
        description: c.description,
        metadata: c.metadata,
        public_key: c.public_key,
        fingerprint: c.fingerprint,
        acl: c.acl,
        owner_id: c.owner_id,
      }),
    },
    uris.collection('ssh_credentials'),
  );
}
