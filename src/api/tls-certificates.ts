import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata } from './schemas.js';

const TlsCertificateSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  certificate_pem: Type.String(),
  subject_common_name: Type.String(),
  subject_alternative_names: Type.Object({
    dns_names: Type.Array(Type.String()),
    ips: Type.Array(Type.String()),
  }),
  issued_at: Type.Union([Type.String(), Type.Null()]),
  not_before: Type.String(),
  not_after: Type.String(),
  issuer_common_name: Type.String(),
  serial_number: Type.String(),
  private_key_type: Type.String(),
  managed: Type.Boolean(),
});

/**
 * `/tls_certificates`: certificates with their private keys, uploaded by users or issued by ACME
 * for reserved domains. The key goes in at create and never comes out; a reserved domain serves
 * one through its `certificate_id`.
 * @example await tlsCertificateRoutes(app, ctx)
 */
export async function tlsCertificateRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'tls_certificates',
      listKey: 'tls_certificates',
      name: 'TLS certificate',
      tag: 'TLS certificates',
      item: TlsCertificateSchema,
      createBody: Body({
        certificate_pem: Type.String({
          description: 'the certificate chain in PEM, leaf first, then intermediates',
        }),
        private_key_pem: Type.String({
          description: "the leaf's unencrypted private key in PEM; stored, never returned",
        }),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.tlsCertificates,
      view: (cert) => ({
        id: cert.id,
        uri: uris.of(cert.id),
        created_at: cert.created_at,
        description: cert.description,
        metadata: cert.metadata,
        certificate_pem: cert.certificate_pem,
        subject_common_name: cert.subject_common_name,
        subject_alternative_names: cert.subject_alternative_names,
        issued_at: cert.managed_by === null ? null : cert.created_at,
        not_before: cert.not_before,
        not_after: cert.not_after,
        issuer_common_name: cert.issuer_common_name,
        serial_number: cert.serial_number,
        private_key_type: cert.private_key_type,
        managed: cert.managed_by !== null,
      }),
    },
    uris.collection('tls_certificates'),
  );
}
