import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Ref } from './schemas.js';

export const IpPolicyRuleSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  cidr: Type.String(),
  ip_policy: Ref,
  action: Type.Union([Type.Literal('allow'), Type.Literal('deny')]),
});

const Cidr = Type.String({
  description: 'an IPv4 or IPv6 block such as 212.3.14.0/24; the address must start the block',
});

/** `/ip_policy_rules`: the CIDR blocks of IP policies, each allowed or denied. */
export async function ipPolicyRuleRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'ip_policy_rules',
      listKey: 'ip_policy_rules',
      name: 'IP policy rule',
      tag: 'IP policies',
      item: IpPolicyRuleSchema,
      createBody: Body({
        cidr: Cidr,
        ip_policy_id: Type.String({ description: 'the IP policy (ipp_…) the rule belongs to' }),
        // Checked by the repository so a wrong value gets ERR_NGROK_1410, not the generic code.
        action: Type.String({ description: "'allow' or 'deny'", examples: ['allow', 'deny'] }),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      updateBody: Body({
        cidr: Type.Optional(Cidr),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        // Listed only so that sending them is answered with how to change them.
        action: Type.Optional(
          Type.Unknown({ description: 'cannot be changed: delete the rule and create another' }),
        ),
        ip_policy_id: Type.Optional(
          Type.Unknown({ description: 'cannot be changed: delete the rule and create another' }),
        ),
      }),
      repo: repos.ipPolicyRules,
      view: (r) => ({
        id: r.id,
        uri: uris.of(r.id),
        created_at: r.created_at,
        description: r.description,
        metadata: r.metadata,
        cidr: r.cidr,
        ip_policy: uris.ref(r.ip_policy_id),
        action: r.action,
      }),
    },
    uris.collection('ip_policy_rules'),
  );
}
