import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static, TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { NotFoundError } from '../core/errors.js';
import type { Page, PageRequest } from '../store/paging.js';
import { listEnvelope, pageRequest } from './paging.js';
import { IdParams, ListOf, ListQuery } from './schemas.js';

/** The five operations every resource repository offers. */
export interface CrudRepository<T, C, U> {
  create(input: C): Promise<T>;
  get(id: string): Promise<T | undefined>;
  list(page: PageRequest): Promise<Page<T>>;
  update(id: string, patch: U): Promise<T | undefined>;
  delete(id: string): Promise<boolean>;
}

/**
 * How a resource appears in the API. The request types come from the body schemas (the repository
 * must take what they describe).
 */
export interface CrudSpec<T, CB extends TSchema, UB extends TSchema> {
  /** Collection path without leading slash, e.g. `bot_users` or `edges/tcp`. */
  path: string;
  /** Key of the list envelope, e.g. `bot_users`. */
  listKey: string;
  /** Human name for OpenAPI summaries, e.g. `bot user`. */
  name: string;
  tag: string;
  /** Response schema of one item. */
  item: TSchema;
  createBody: CB;
  updateBody: UB;
  repo: CrudRepository<T, Static<CB>, Static<UB>>;
  /** Turn a stored item into its API shape (adds `uri`, turns ids into refs). */
  view(item: T): unknown;
  /** Whether create may be called without a body (every field optional). */
  createBodyOptional?: boolean;
  /** The list a request sees, when not every item (e.g. a non-admin's own API keys only). */
  listFor?: (request: FastifyRequest, page: PageRequest) => Promise<Page<T>>;
}

/** Throw the API's 404 when `value` is undefined. */
export function found<T>(value: T | undefined): T {
  if (value === undefined) throw new NotFoundError();
  return value;
}

/**
 * Register create (201), get, list (paged), PATCH update and delete (204) for one resource.
 * @example registerCrud(app, { path: 'bot_users', listKey: 'bot_users', ... })
 */
export function registerCrud<T, CB extends TSchema, UB extends TSchema>(
  fastify: FastifyInstance,
  spec: CrudSpec<T, CB, UB>,
  collectionUri: string,
): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = [spec.tag];
  app.post(
    `/${spec.path}`,
    {
      schema: {
        tags,
        summary: `Create a ${spec.name}`,
        body: spec.createBody,
        response: { 201: spec.item },
      },
    },
    async (request, reply) => {
      const created = await spec.repo.create(request.body);
      return reply.status(201).send(spec.view(created));
    },
  );
  app.get(
    `/${spec.path}`,
    {
      schema: {
        tags,
        summary: `List ${spec.name}s`,
        querystring: ListQuery,
        response: { 200: ListOf(spec.listKey, spec.item) },
      },
    },
    async (request) => {
      const req = pageRequest(request.query);
      const page = spec.listFor ? await spec.listFor(request, req) : await spec.repo.list(req);
      return listEnvelope(
        spec.listKey,
        { items: page.items.map((i) => spec.view(i)), nextBeforeId: page.nextBeforeId },
        collectionUri,
        req,
      );
    },
  );
  app.get(
    `/${spec.path}/:id`,
    {
      schema: {
        tags,
        summary: `Get a ${spec.name}`,
        params: IdParams,
        response: { 200: spec.item },
      },
    },
    async (request) => spec.view(found(await spec.repo.get(request.params.id))),
  );
  app.patch(
    `/${spec.path}/:id`,
    {
      schema: {
        tags,
        summary: `Update a ${spec.name}`,
        params: IdParams,
        body: spec.updateBody,
        response: { 200: spec.item },
      },
    },
    async (request) => spec.view(found(await spec.repo.update(request.params.id, request.body))),
  );
  registerDelete(fastify, `/${spec.path}/:id`, tags, `Delete a ${spec.name}`, (id) =>
    spec.repo.delete(id),
  );
}

/**
 * Register `DELETE path` (a path with an `:id` parameter): 204 with no body when `remove(id)`
 * removed something, else the API's 404.
 * @example registerDelete(app, '/endpoints/:id', ['Endpoints'], 'Delete a cloud endpoint', (id) => repos.cloudEndpoints.delete(id));
 */
export function registerDelete(
  fastify: FastifyInstance,
  path: string,
  tags: string[],
  summary: string,
  remove: (id: string) => Promise<boolean>,
): void {
  fastify
    .withTypeProvider<TypeBoxTypeProvider>()
    .delete(
      path,
      { schema: { tags, summary, params: IdParams, response: { 204: { type: 'null' } } } },
      async (request, reply) => {
        if (!(await remove(request.params.id))) throw new NotFoundError();
        return reply.status(204).send();
      },
    );
}
