import { Type, type TProperties, type TSchema } from '@sinclair/typebox';
import type { EdgeType, ModuleName } from '../store/edges.js';
import { Body, Description, Metadata, Nullable, Ref } from './schemas.js';

const Enabled = Type.Optional(
  Type.Boolean({
    description: 'true if the module is applied to traffic, false to disable; default true',
  }),
);

/* Mutate shapes: the bodies of module PUTs and the module fields of edge create and PATCH. */
export const BackendMutate = Body({
  enabled: Enabled,
  backend_id: Type.String({ description: 'the backend that serves the edge (bkd…_ id)' }),
});
export const IpRestrictionMutate = Body({
  enabled: Enabled,
  ip_policy_ids: Type.Array(Type.String(), {
    description: 'IP policies (ipp_ ids) checked against each source IP; at least one',
  }),
});
export const TrafficPolicyMutate = Body({
  enabled: Enabled,
  value: Type.String({ description: 'the traffic policy document, JSON or YAML, as a string' }),
});
export const MutualTlsMutate = Body({
  enabled: Enabled,
  certificate_authority_ids: Type.Array(Type.String(), {
    description: 'CAs (ca_ ids) that client certificates must chain to; at least one',
  }),
});
export const TlsTerminationMutate = Body({
  enabled: Enabled,
  terminate_at: Type.String({ description: "'edge' (terminate TLS) or 'upstream' (pass through)" }),
  min_version: Type.Optional(
    Nullable(Type.String({ description: "'1.0', '1.1', '1.2' or '1.3'; null when upstream" })),
  ),
});

/* Module shapes in replies. */
export const BackendModule = Type.Object({ enabled: Type.Boolean(), backend: Ref });
export const IpRestrictionModule = Type.Object({
  enabled: Type.Boolean(),
  ip_policies: Type.Array(Ref),
});
export const TrafficPolicyModule = Type.Object({ enabled: Type.Boolean(), value: Type.String() });
export const MutualTlsModule = Type.Object({
  enabled: Type.Boolean(),
  certificate_authorities: Type.Array(Ref),
});
export const TlsTerminationModule = Type.Object({
  enabled: Type.Boolean(),
  terminate_at: Type.String(),
  min_version: Nullable(Type.String()),
});

/** Request and reply schema of each module, by name. */
export const MODULE_SCHEMAS = {
  backend: { mutate: BackendMutate, reply: BackendModule },
  ip_restriction: { mutate: IpRestrictionMutate, reply: IpRestrictionModule },
  mutual_tls: { mutate: MutualTlsMutate, reply: MutualTlsModule },
  tls_termination: { mutate: TlsTerminationMutate, reply: TlsTerminationModule },
  traffic_policy: { mutate: TrafficPolicyMutate, reply: TrafficPolicyModule },
} satisfies Record<ModuleName, { mutate: TSchema; reply: TSchema }>;

const Hostports = Type.Array(Type.String(), {
  description:
    'TCP edges: addrs of reserved addresses; TLS edges: <reserved domain>:<HTTPS port>. Replaces the whole list; [] or null clears it',
});

/** The reply schema of a TCP or TLS edge. */
export function edgeSchema(type: EdgeType): TSchema {
  const tls: TProperties =
    type === 'tls'
      ? {
          mutual_tls: Nullable(MutualTlsModule),
          tls_termination: Nullable(TlsTerminationModule),
        }
      : {};
  return Type.Object({
    id: Type.String(),
    uri: Type.String(),
    description: Type.String(),
    metadata: Type.String(),
    created_at: Type.String(),
    hostports: Nullable(Type.Array(Type.String())),
    backend: Nullable(BackendModule),
    ip_restriction: Nullable(IpRestrictionModule),
    ...tls,
    traffic_policy: Nullable(TrafficPolicyModule),
    policy: Type.Null({ description: 'always null; the traffic_policy module replaces it' }),
  });
}

const mod = <T extends TSchema>(schema: T) => Type.Optional(Nullable(schema));
const TLS_MODULES = {
  mutual_tls: mod(MutualTlsMutate),
  tls_termination: mod(TlsTerminationMutate),
};

/**
 * The create and PATCH body of a TCP or TLS edge. Modules accept null so that a PATCH that tries
 * to remove one gets a message pointing at the module's DELETE path instead of a type error.
 */
export function edgeBody(type: EdgeType) {
  // A TCP edge's body refuses the TLS-only modules; typed as the TLS one's, it covers both.
  const tls = type === 'tls' ? TLS_MODULES : ({} as typeof TLS_MODULES);
  return Body({
    description: Type.Optional(Description),
    metadata: Type.Optional(Metadata),
    hostports: Type.Optional(Nullable(Hostports)),
    backend: mod(BackendMutate),
    ip_restriction: mod(IpRestrictionMutate),
    ...tls,
    traffic_policy: mod(TrafficPolicyMutate),
  });
}
