import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ReservedDomain } from '../store/reserved-domains.js';
import type { ApiContext } from './context.js';
import { registerCrud, registerDelete } from './crud.js';
import { Body, Description, Metadata, Name, Nullable, Ref } from './schemas.js';

const CertificateManagementPolicySchema = Type.Object({
  authority: Type.String(),
  private_key_type: Type.String(),
});

const CertificateManagementStatusSchema = Type.Object({
  renews_at: Nullable(Type.String()),
  provisioning_job: Nullable(
    Type.Object({
      error_code: Nullable(Type.String()),
      msg: Type.String(),
      started_at: Type.String(),
      retries_at: Nullable(Type.String()),
    }),
  ),
});

export const ReservedDomainSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  domain: Type.String(),
  region: Type.String({ description: 'deprecated; always empty' }),
  cname_target: Nullable(
    Type.String({
      description:
        'where the CNAME record of a custom domain must point; null under the base domain',
    }),
  ),
  certificate: Nullable(Ref),
  certificate_management_policy: Nullable(CertificateManagementPolicySchema),
  certificate_management_status: Nullable(CertificateManagementStatusSchema),
  acme_challenge_cname_target: Nullable(
    Type.String({
      description:
        'where the `_acme-challenge` CNAME record of a custom wildcard domain must point; null otherwise',
    }),
  ),
  http_endpoint_configuration: Nullable(Ref),
  https_endpoint_configuration: Nullable(Ref),
});

const CertificateManagementPolicyInput = Body({
  authority: Type.Optional(
    Type.String({ description: "certificate authority; only 'letsencrypt' (the default)" }),
  ),
  private_key_type: Type.Optional(Type.String({ description: "'ecdsa' (the default) or 'rsa'" })),
});

const CertificateId = Type.String({
  description:
    'an uploaded certificate (cert_…) to serve; mutually exclusive with certificate_management_policy',
});

const Region = Name('deprecated; accepted and ignored', 64);

/**
 * `/reserved_domains`: domains (wildcards too) that agents and edges may serve, with their DNS
 * targets and certificate policy.
 * @example await reservedDomainRoutes(app, ctx)
 */
export async function reservedDomainRoutes(
  fastify: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const view = (d: ReservedDomain) => ({
    id: d.id,
    uri: uris.of(d.id),
    created_at: d.created_at,
    description: d.description,
    metadata: d.metadata,
    domain: d.domain,
    region: '',
    cname_target: d.cname_target,
    certificate: d.certificate_id === null ? null : uris.ref(d.certificate_id),
    certificate_management_policy: d.certificate_management_policy,
    certificate_management_status: d.certificate_management_status,
    acme_challenge_cname_target: d.acme_challenge_cname_target,
    http_endpoint_configuration: null,
    https_endpoint_configuration: null,
  });
  registerCrud(
    app,
    {
      path: 'reserved_domains',
      listKey: 'reserved_domains',
      name: 'reserved domain',
      tag: 'Reserved domains',
      item: ReservedDomainSchema,
      createBody: Body({
        domain: Type.String({
          description: "the name to reserve; '*.' as the whole first label makes a wildcard",
        }),
        region: Type.Optional(Region),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        certificate_management_policy: Type.Optional(CertificateManagementPolicyInput),
        certificate_id: Type.Optional(CertificateId),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        certificate_management_policy: Type.Optional(CertificateManagementPolicyInput),
        certificate_id: Type.Optional(CertificateId),
      }),
      repo: repos.reservedDomains,
      view,
    },
    uris.collection('reserved_domains'),
  );

  const tags = ['Reserved domains'];
  registerDelete(
    app,
    '/reserved_domains/:id/certificate_management_policy',
    tags,
    'Detach the certificate management policy of a reserved domain',
    (id) => repos.reservedDomains.deleteCertificateManagementPolicy(id),
  );
  registerDelete(
    app,
    '/reserved_domains/:id/certificate',
    tags,
    'Detach the certificate of a reserved domain (the local CA serves until another is attached or issued)',
    (id) => repos.reservedDomains.detachCertificate(id),
  );
}
