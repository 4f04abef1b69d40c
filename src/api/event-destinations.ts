import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { EventDestination } from '../store/event-destinations.js';
import { EVENT_TYPES, type EventSubscription } from '../store/event-subscriptions.js';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { Body, Description, Metadata, Ref } from './schemas.js';

const Url = (description: string) => Type.String({ maxLength: 2048, description });

/** A destination's settings: exactly one of the three kinds (the repository checks the one). */
const Target = Type.Object(
  {
    webhook: Type.Optional(
      Type.Object(
        { url: Url('http(s) URL each batch is POSTed to, as a JSON array of events') },
        { additionalProperties: false },
      ),
    ),
    file: Type.Optional(
      Type.Object(
        {
          path: Type.String({
            maxLength: 4096,
            description: 'absolute path on each node; events are appended as JSON lines',
          }),
        },
        { additionalProperties: false },
      ),
    ),
    opentelemetry: Type.Optional(
      Type.Object(
        {
          url: Url('OTLP/HTTP logs endpoint, e.g. http://collector:4318/v1/logs'),
          headers: Type.Optional(
            Type.Record(Type.String(), Type.String({ maxLength: 4096 }), {
              description:
                'headers sent with each request, e.g. an API key; write-only (stored encrypted)',
            }),
          ),
          header_names: Type.Optional(
            Type.Array(Type.String(), { description: 'in replies: the names of the headers set' }),
          ),
          protocol: Type.Optional(
            Type.String({
              maxLength: 32,
              description:
                'OTLP/HTTP encoding: http/protobuf (the default, as OTEL_EXPORTER_OTLP_PROTOCOL) or http/json',
            }),
          ),
          traces_url: Type.Optional(
            Url(
              'OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces: each request also as a span, and the service gets a traceparent naming it',
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, description: 'exactly one of webhook, file, opentelemetry' },
);

export const EventDestinationSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  format: Type.String(),
  target: Target,
  signing_secret: Type.Optional(
    Type.String({
      description:
        'webhooks: the HMAC-SHA256 key of X-Burrow-Signature; shown only in the answer to the create',
    }),
  ),
});

const EventType = Type.String({ description: `one of ${EVENT_TYPES.join(', ')}` });

export const EventSubscriptionSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  sources: Type.Array(Type.Object({ type: Type.String() })),
  destinations: Type.Array(Ref),
});

/**
 * `/event_destinations` and `/event_subscriptions`, as ngrok's API names them: where traffic
 * events go (a signed webhook, a JSON-lines file, an OpenTelemetry collector) and which event
 * types go to which destinations. The edge reloads them on every change (change-notices.ts).
 */
export async function eventDestinationRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const described = { description: Type.Optional(Description), metadata: Type.Optional(Metadata) };
  const format = Type.Optional(Type.String({ description: 'json, the only format' }));
  registerCrud(
    app,
    {
      path: 'event_destinations',
      listKey: 'event_destinations',
      name: 'event destination',
      tag: 'Event destinations',
      item: EventDestinationSchema,
      createBody: Body({ ...described, format, target: Target }),
      updateBody: Body({ ...described, format, target: Type.Optional(Target) }),
      repo: repos.eventDestinations,
      view: (d: EventDestination) => ({
        id: d.id,
        uri: uris.of(d.id),
        created_at: d.created_at,
        description: d.description,
        metadata: d.metadata,
        format: d.format,
        target: d.target,
        ...(d.signing_secret ? { signing_secret: d.signing_secret } : {}),
      }),
    },
    uris.collection('event_destinations'),
  );
  const subscription = {
    ...described,
    sources: Type.Optional(Type.Array(Type.Object({ type: EventType }), { maxItems: 16 })),
    destination_ids: Type.Optional(Type.Array(Type.String(), { maxItems: 64 })),
  };
  registerCrud(
    app,
    {
      path: 'event_subscriptions',
      listKey: 'event_subscriptions',
      name: 'event subscription',
      tag: 'Event subscriptions',
      item: EventSubscriptionSchema,
      createBody: Body(subscription),
      updateBody: Body(subscription),
      repo: repos.eventSubscriptions,
      createBodyOptional: true,
      view: (s: EventSubscription) => ({
        id: s.id,
        uri: uris.of(s.id),
        created_at: s.created_at,
        description: s.description,
        metadata: s.metadata,
        sources: s.sources,
        destinations: s.destination_ids.map((id) => uris.ref(id)),
      }),
    },
    uris.collection('event_subscriptions'),
  );
}
