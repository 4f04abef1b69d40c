import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Name, Nullable, Ref } from './schemas.js';

export const ReservedAddrSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  addr: Type.String({ description: 'host:port assigned by the server at creation' }),
  region: Type.String({ description: 'the region given at creation; informational' }),
  endpoint_configuration: Nullable(Ref),
});

/**
 * `/reserved_addrs`: TCP addresses (`<tcp host>:<port>`) the server assigns from `--tcp-ports`.
 * @example await reservedAddrRoutes(app, ctx)
 */
export async function reservedAddrRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  registerCrud(
    app,
    {
      path: 'reserved_addrs',
      listKey: 'reserved_addrs',
      name: 'reserved address',
      tag: 'Reserved addresses',
      item: ReservedAddrSchema,
      createBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        region: Type.Optional(Name('informational; Burrow has one region', 64)),
      }),
      updateBody: Body({
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.reservedAddrs,
      createBodyOptional: true,
      view: (a) => ({
        id: a.id,
        uri: uris.of(a.id),
        created_at: a.created_at,
        description: a.description,
        metadata: a.metadata,
        addr: a.addr,
        region: a.region,
        endpoint_configuration: null,
      }),
    },
    uris.collection('reserved_addrs'),
  );
}
