import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata } from './schemas.js';

export const CertificateAuthoritySchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  ca_pem: Type.String(),
  subject_common_name: Type.String(),
  not_before: Type.String(),
  not_after: Type.String(),
  key_usages: Type.Array(Type.String()),
  extended_key_usages: Type.Array(Type.String()),
});

/** `/certificate_authorities`: CA certificates that TLS edges' mutual_tls module trusts. */
export async function certificateAuthorityRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'certificate_authorities',
      listKey: 'certificate_authorities',
      name: 'certificate authority',
      tag: 'Certificate authorities',
      item: CertificateAuthoritySchema,
      createBody: Body({
        ca_pem: Type.String({
          description: 'one CA certificate (basicConstraints CA:TRUE) in PEM; no private key',
        }),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.certificateAuthorities,
      view: (ca) => ({ ...ca, uri: uris.of(ca.id) }),
    },
    uris.collection('certificate_authorities'),
  );
}
