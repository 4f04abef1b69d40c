import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import { CODES, ConflictError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns } from './described.js';
import { nowRfc3339 } from './paging.js';
import { ResourceRepository } from './resource-repository.js';

/** The row of a cloud endpoint (migration 0004). */
export interface CloudEndpointsTable {
  id: string;
  url: string;
  traffic_policy: string;
  /** JSON array of strings, e.g. `["public"]`. */
  bindings: string;
  pooling_enabled: number;
  description: string;
  metadata: string;
  created_at: string;
  updated_at: string;
}

/** A cloud endpoint: a URL served by its traffic policy alone, with no agent online. */
export interface CloudEndpoint {
  id: string;
  url: string;
  traffic_policy: string;
  bindings: string[];
  pooling_enabled: boolean;
  description: string;
  metadata: string;
  created_at: string;
  updated_at: string;
}

export interface CloudEndpointCreate {
  url: string;
  traffic_policy: string;
  bindings: string[];
  pooling_enabled?: boolean | undefined;
  description?: string | undefined;
  metadata?: string | undefined;
}

export type CloudEndpointUpdate = Partial<CloudEndpointCreate>;

type Tables = { cloud_endpoints: CloudEndpointsTable };

function toEndpoint(row: CloudEndpointsTable): CloudEndpoint {
  let bindings: string[] = [];
  try {
    const parsed: unknown = JSON.parse(row.bindings);
    if (Array.isArray(parsed)) bindings = parsed.filter((b): b is string => typeof b === 'string');
  } catch {
    // A row is only ever written by this repository; an unreadable one shows no bindings.
  }
  return { ...row, bindings, pooling_enabled: row.pooling_enabled !== 0 };
}

function urlTaken(url: string): ConflictError {
  return new ConflictError(
    CODES.bindAlreadyOnline,
    `A cloud endpoint with the url ${quote(url)} already exists. Update that endpoint (PATCH /endpoints/{id}) or delete it first.`,
  );
}

/**
 * Cloud endpoints in the store. `changes` emits 'change' (with the id) after every write, so the
 * edge in this process applies it at once; other processes reload on their timer.
 * @example const ep = await repo.create({ url: 'https://app.example.com', traffic_policy: '', bindings: ['public'] });
 */
export class CloudEndpointRepository extends ResourceRepository<
  'cloud_endpoints',
  CloudEndpoint,
  CloudEndpointsTable,
  Tables
> {
  readonly changes = new EventEmitter();

  constructor(deps: RepoDeps) {
    // The database seen with this table (its row type lives here, not in schema.ts).
    const db: Kysely<Tables> = deps.db.withTables<Tables>();
    super(db, 'cloud_endpoints', toEndpoint);
  }

  async create(input: CloudEndpointCreate): Promise<CloudEndpoint> {
    const described = describedColumns(input);
    const row: CloudEndpointsTable = {
      id: newId(ID_PREFIX.endpoint),
      url: input.url,
      traffic_policy: input.traffic_policy,
      bindings: JSON.stringify(input.bindings),
      pooling_enabled: input.pooling_enabled ? 1 : 0,
      ...described,
      updated_at: described.created_at,
    };
    try {
      await this.db.insertInto('cloud_endpoints').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw urlTaken(input.url);
      throw err;
    }
    this.changes.emit('change', row.id);
    return toEndpoint(row);
  }

  /** Every cloud endpoint (the edge serves them all). */
  async all(): Promise<CloudEndpoint[]> {
    const rows = await this.db.selectFrom('cloud_endpoints').selectAll().orderBy('id').execute();
    return rows.map(toEndpoint);
  }

  /** PATCH: only what is sent changes. Undefined when there is no such endpoint. */
  async update(id: string, patch: CloudEndpointUpdate): Promise<CloudEndpoint | undefined> {
    const set: Partial<CloudEndpointsTable> = describedChanges(patch);
    if (patch.url !== undefined) set.url = patch.url;
    if (patch.traffic_policy !== undefined) set.traffic_policy = patch.traffic_policy;
    if (patch.bindings !== undefined) set.bindings = JSON.stringify(patch.bindings);
    if (patch.pooling_enabled !== undefined) set.pooling_enabled = patch.pooling_enabled ? 1 : 0;
    if (Object.keys(set).length > 0) set.updated_at = nowRfc3339();
    const urlTakenOr = (err: unknown) => (isUniqueViolation(err) ? urlTaken(patch.url ?? '') : err);
    if (await this.writeColumns(id, set, urlTakenOr)) this.changes.emit('change', id);
    return this.get(id);
  }

  /** Delete; false when absent. */
  async delete(id: string): Promise<boolean> {
    const deleted = await this.deleteRow(id);
    if (deleted) this.changes.emit('change', id);
    return deleted;
  }
}
