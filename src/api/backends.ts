import {
  Type,
  type Static,
  type TOptional,
  type TProperties,
  type TSchema,
} from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { LABEL_LIMITS } from '../core/labels.js';
import { MAX_WEIGHT, type Backend } from '../store/backend-kinds.js';
import type { ApiContext } from './context.js';
import { registerCrud, type CrudRepository } from './crud.js';
import { Body, Description, Metadata, Ref } from './schemas.js';

const Common = {
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
};

const Labels = Type.Record(Type.String(), Type.String(), {
  description: `labels to select tunnels on; 1 to ${LABEL_LIMITS.maxLabels}, keys of 1-${LABEL_LIMITS.keyMaxLength} characters [A-Za-z0-9._/-], values of 1-${LABEL_LIMITS.valueMaxLength} characters [A-Za-z0-9._/:-], no '='`,
});
const FailoverMembers = Type.Array(Type.String(), {
  description: 'backend ids, tried in this order; each must exist',
});
const WeightedMembers = Type.Record(
  Type.String(),
  Type.Integer({ minimum: 0, maximum: MAX_WEIGHT }),
  { description: `backend id to weight (0 to ${MAX_WEIGHT}); each backend must exist` },
);
const Address = Type.String({ description: "'<host>:<port>' to connect to" });
const TlsInput = Type.Object(
  { enabled: Type.Optional(Type.Boolean({ description: 'connect with TLS; default false' })) },
  { additionalProperties: false },
);

export const TunnelGroupBackendSchema = Type.Object({
  ...Common,
  labels: Type.Record(Type.String(), Type.String()),
  tunnels: Type.Array(Ref, { description: 'online tunnels whose labels include every label' }),
});
export const FailoverBackendSchema = Type.Object({
  ...Common,
  backends: Type.Array(Type.String()),
});
export const WeightedBackendSchema = Type.Object({
  ...Common,
  backends: Type.Record(Type.String(), Type.Integer()),
});
export const StaticBackendSchema = Type.Object({
  ...Common,
  address: Type.String(),
  tls: Type.Object({ enabled: Type.Boolean() }),
});

/** Create takes the type's own fields (required) plus description and metadata. */
function createBody<P extends TProperties>(own: P) {
  return Body({
    description: Type.Optional(Description),
    metadata: Type.Optional(Metadata),
    ...own,
  });
}

/** Update takes every field as optional. */
function updateBody<P extends TProperties>(own: P) {
  const optional = Object.fromEntries(
    Object.entries(own).map(([k, v]) => [k, Type.Optional(v)]),
  ) as { [K in keyof P]: TOptional<P[K]> };
  return Body({
    description: Type.Optional(Description),
    metadata: Type.Optional(Metadata),
    ...optional,
  });
}

/**
 * `/backends/{tunnel_group,failover,weighted,static}`: where an edge sends its traffic. Each type
 * lists only its own backends under the list key `backends`.
 * @example await backendRoutes(app, ctx);
 */
export async function backendRoutes(
  app: FastifyInstance,
  { repos, uris, online }: ApiContext,
): Promise<void> {
  const common = (b: Backend) => ({
    id: b.id,
    uri: uris.of(b.id),
    created_at: b.created_at,
    description: b.description,
    metadata: b.metadata,
  });
  /** One backend type: its CRUD routes under `backends/<type>`, listed under `backends`. */
  const register = <B extends Backend, CP extends TProperties, UP extends TProperties = CP>(
    type: string,
    item: TSchema,
    fields: { create: CP; update?: UP },
    repo: CrudRepository<
      B,
      Static<ReturnType<typeof createBody<CP>>>,
      Static<ReturnType<typeof updateBody<UP>>>
    >,
    view: (b: B) => object,
  ): void => {
    const path = `backends/${type}`;
    registerCrud(
      app,
      {
        path,
        listKey: 'backends',
        name: `${type.replace('_', ' ')} backend`,
        tag: 'Backends',
        item,
        createBody: createBody(fields.create),
        // Without its own update fields a type updates the create fields (UP defaults to CP).
        updateBody: updateBody((fields.update ?? fields.create) as UP),
        repo,
        view: (b) => ({ ...common(b), ...view(b) }),
      },
      uris.collection(path),
    );
  };

  register(
    'tunnel_group',
    TunnelGroupBackendSchema,
    { create: { labels: Labels } },
    repos.backends.tunnelGroups,
    (b) => ({
      labels: b.labels,
      // Live state: which online tunnels this selector matches right now.
      tunnels: online.tunnelsMatching(b.labels).map((id) => uris.ref(id)),
    }),
  );
  register(
    'failover',
    FailoverBackendSchema,
    { create: { backends: FailoverMembers } },
    repos.backends.failovers,
    (b) => ({ backends: b.backends }),
  );
  register(
    'weighted',
    WeightedBackendSchema,
    { create: { backends: WeightedMembers } },
    repos.backends.weighted,
    (b) => ({ backends: b.backends }),
  );
  register(
    'static',
    StaticBackendSchema,
    {
      create: { address: Address, tls: Type.Optional(TlsInput) },
      update: { address: Address, tls: TlsInput },
    },
    repos.backends.statics,
    (b) => ({ address: b.address, tls: b.tls }),
  );
}
