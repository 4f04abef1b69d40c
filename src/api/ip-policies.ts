import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata } from './schemas.js';

export const IpPolicySchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
});

/** `/ip_policies`: groups of allow and deny rules that edges' ip_restriction modules use. */
export async function ipPolicyRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const fields = {
    description: Type.Optional(Description),
    metadata: Type.Optional(Metadata),
  };
  registerCrud(
    app,
    {
      path: 'ip_policies',
      listKey: 'ip_policies',
      name: 'IP policy',
      tag: 'IP policies',
      item: IpPolicySchema,
      createBody: Body(fields),
      updateBody: Body(fields),
      repo: repos.ipPolicies,
      createBodyOptional: true,
      view: (p) => ({
        id: p.id,
        uri: uris.of(p.id),
        created_at: p.created_at,
        description: p.description,
        metadata: p.metadata,
      }),
    },
    uris.collection('ip_policies'),
  );
}
