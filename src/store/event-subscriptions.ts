import { CODES, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, type DescribedInput } from './described.js';
import { missingIds } from './refs.js';
import { ResourceRepository } from './resource-repository.js';
import type { EventSubscriptionsTable } from './schema.js';

/** The event types Burrow sends, as subscriptions' `sources[].type` name them (ngrok's names). */
export const EVENT_TYPES = ['http_request_complete.v0', 'tcp_connection_closed.v0'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** A subscription as stored: its event types and the destinations they go to. */
export interface EventSubscription {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  sources: { type: EventType }[];
  destination_ids: string[];
}

export interface EventSubscriptionCreate extends DescribedInput {
  sources?: { type: string }[] | undefined;
  destination_ids?: string[] | undefined;
}

export type EventSubscriptionUpdate = EventSubscriptionCreate;

function viewOf(row: EventSubscriptionsTable): EventSubscription {
  return {
    id: row.id,
    description: row.description,
    metadata: row.metadata,
    created_at: row.created_at,
    sources: (JSON.parse(row.sources) as EventType[]).map((type) => ({ type })),
    destination_ids: JSON.parse(row.destination_ids) as string[],
  };
}

function checkSources(sources: { type: string }[]): EventType[] {
  const types = sources.map(({ type }, i) => {
    if (!(EVENT_TYPES as readonly string[]).includes(type)) {
      throw new ValidationError(
        CODES.invalidValue,
        `sources[${i}].type`,
        `must be one of ${EVENT_TYPES.join(', ')}`,
      );
    }
    return type as EventType;
  });
  return [...new Set(types)];
}

/**
 * Event subscriptions: each names event types and the destinations that receive them. An event
 * goes once to each destination whatever the number of subscriptions that route it there.
 * @example await subs.create({ sources: [{ type: 'tcp_connection_closed.v0' }], destination_ids: ['ed_…'] });
 */
export class EventSubscriptionRepository extends ResourceRepository<
  'event_subscriptions',
  EventSubscription
> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'event_subscriptions', viewOf);
  }

  async create(input: EventSubscriptionCreate): Promise<EventSubscription> {
    const row: EventSubscriptionsTable = {
      id: newId(ID_PREFIX.eventSubscription),
      ...describedColumns(input),
      sources: JSON.stringify(checkSources(input.sources ?? [])),
      destination_ids: JSON.stringify(await this.checkDestinations(input.destination_ids ?? [])),
    };
    await this.db.insertInto('event_subscriptions').values(row).execute();
    return viewOf(row);
  }

  async update(id: string, patch: EventSubscriptionUpdate): Promise<EventSubscription | undefined> {
    const set: Partial<EventSubscriptionsTable> = describedChanges(patch);
    if (patch.sources !== undefined) set.sources = JSON.stringify(checkSources(patch.sources));
    if (patch.destination_ids !== undefined) {
      set.destination_ids = JSON.stringify(await this.checkDestinations(patch.destination_ids));
    }
    await this.writeColumns(id, set);
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  /** Every subscription, for the edge's routing table. */
  async all(): Promise<EventSubscription[]> {
    const rows = await this.db
      .selectFrom('event_subscriptions')
      .selectAll()
      .orderBy('id')
      .execute();
    return rows.map(viewOf);
  }

  private async checkDestinations(ids: string[]): Promise<string[]> {
    const unique = [...new Set(ids)];
    const missing = await missingIds(this.db, 'event_destinations', unique);
    if (missing.length > 0) {
      throw new ValidationError(
        CODES.invalidReference,
        `destination_ids[${ids.indexOf(missing[0]!)}]`,
        `no event destination has the id ${missing[0]}; create it first (POST /event_destinations)`,
      );
    }
    return unique;
  }
}
