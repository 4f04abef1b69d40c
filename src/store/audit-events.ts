import type { Kysely } from 'kysely';
import { ID_PREFIX, newId } from '../core/ids.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';
import type { AuditEventsTable, Database } from './schema.js';

/** Who made a change: an API key, a dashboard user, or nobody yet (sign-in, first-user setup). */
export type AuditActorType = 'api_key' | 'user' | 'none';

/** One recorded change. Holds no body, header or token: only who, what, when and from where. */
export type AuditEvent = Omit<AuditEventsTable, 'actor_type'> & { actor_type: AuditActorType };

/** What the API records; id and time are added here. */
export type AuditEventInput = Omit<AuditEvent, 'id' | 'created_at'>;

function fromRow(row: AuditEventsTable): AuditEvent {
  const actor = row.actor_type;
  return {
    ...row,
    actor_type: actor === 'api_key' || actor === 'user' ? actor : 'none',
    // PostgreSQL returns integer columns as numbers, SQLite too; Number() keeps both exact.
    status_code: Number(row.status_code),
    // Rows written before migration 0008-roles have no owner.
    actor_owner_id: row.actor_owner_id ?? null,
  };
}

/**
 * The audit trail, append-only: nothing in Burrow updates or deletes a row.
 * @example await auditEvents.record({ operation_id: 'op_…', actor_type: 'api_key', actor_id: 'ak_…', method: 'POST', path: '/ip_policies', status_code: 201, resource_id: 'ipp_…', client_ip: '127.0.0.1' });
 */
export class AuditEventRepository extends ResourceRepository<'audit_events', AuditEvent> {
  constructor(db: Kysely<Database>) {
    super(db, 'audit_events', fromRow);
  }

  async record(input: AuditEventInput): Promise<AuditEvent> {
    const row: AuditEventsTable = {
      id: newId(ID_PREFIX.auditEvent),
      created_at: nowRfc3339(),
      ...input,
    };
    await this.db.insertInto('audit_events').values(row).execute();
    return fromRow(row);
  }
}
