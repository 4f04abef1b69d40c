import { EventEmitter } from 'node:events';
import type { Transaction } from 'kysely';
import { CODES, ConflictError, UnknownFieldError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { replaceHostports, resolveHostports } from './edge-hostports.js';
import {
  EDGE_MODULES,
  checkModuleReferences,
  checkTermination,
  checkTerminationRemoval,
  normalizeModule,
  referencedIds,
  type EdgeModules,
  type EdgeType,
  type FieldPrefix,
  type ModuleMutates,
  type ModuleName,
} from './edge-modules.js';
import { describedColumns, describedOf } from './described.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
import { setRefs, clearRefs } from './refs.js';
import type { Database, EdgesTable } from './schema.js';

export * from './edge-modules.js';

/** A TCP or TLS edge with its modules parsed. */
export interface Edge extends EdgeModules {
  id: string;
  type: EdgeType;
  description: string;
  metadata: string;
  created_at: string;
  /** null when the edge serves no hostport. */
  hostports: string[] | null;
}

/**
 * What create and PATCH take. A module left out is not touched; null is "unset" on create and
 * refused on PATCH (modules are removed with `deleteModule`). `hostports` replaces the whole list.
 */
export type EdgeInput = {
  description?: string | undefined;
  metadata?: string | undefined;
  hostports?: string[] | null | undefined;
} & { [N in ModuleName]?: ModuleMutates[N] | null | undefined };

const MODULE_COLUMNS = [
  'backend',
  'ip_restriction',
  'mutual_tls',
  'tls_termination',
  'traffic_policy',
] as const satisfies readonly ModuleName[];

const PREFIX: Record<EdgeType, typeof ID_PREFIX.tcpEdge | typeof ID_PREFIX.tlsEdge> = {
  tcp: ID_PREFIX.tcpEdge,
  tls: ID_PREFIX.tlsEdge,
};

function parseJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}

function toEdge(row: EdgesTable): Edge {
  return {
    id: row.id,
    type: row.type as EdgeType,
    ...describedOf(row),
    hostports: parseJson<string[]>(row.hostports),
    backend: parseJson(row.backend),
    ip_restriction: parseJson(row.ip_restriction),
    mutual_tls: parseJson(row.mutual_tls),
    tls_termination: parseJson(row.tls_termination),
    traffic_policy: parseJson(row.traffic_policy),
  };
}

function toRow(edge: Edge): EdgesTable {
  const json = (v: unknown) => (v === null ? null : JSON.stringify(v));
  return {
    id: edge.id,
    type: edge.type,
    description: edge.description,
    metadata: edge.metadata,
    created_at: edge.created_at,
    hostports: json(edge.hostports),
    backend: json(edge.backend),
    ip_restriction: json(edge.ip_restriction),
    mutual_tls: json(edge.mutual_tls),
    tls_termination: json(edge.tls_termination),
    traffic_policy: json(edge.traffic_policy),
  };
}

/** A change to an edge, checked and ready to save. */
interface PendingWrite {
  edge: Edge;
  /** The new hostport list, or undefined to keep the stored one. */
  hostports: string[] | undefined;
  changed: ModuleName[];
}

/**
 * TCP and TLS edges and their modules. Every write checks hostports and references and records
 * them (edge_hostports, refs) in one transaction, so a reservation, backend, IP policy or CA an
 * edge uses cannot be deleted from under it.
 * @example const edge = await edges.create('tcp', { hostports: ['tcp.burrow.test:20000'], backend: { backend_id } });
 */
export class EdgeRepository {
  /**
   * Emits 'change' (edge id) after every committed write, so an edge runtime in the same process
   * applies it at once; other processes see it on their periodic resync.
   */
  readonly changes = new EventEmitter();

  constructor(private readonly deps: RepoDeps) {}

  async create(type: EdgeType, input: EdgeInput): Promise<Edge> {
    const edge: Edge = {
      id: newId(PREFIX[type]),
      type,
      ...describedColumns(input),
      hostports: null,
      backend: null,
      ip_restriction: null,
      mutual_tls: null,
      tls_termination: null,
      traffic_policy: null,
    };
    const pending = this.apply(edge, input, 'create');
    return this.save(pending, true);
  }

  /** The edge `id`, or undefined; with `type`, only an edge of that type. */
  async get(id: string, type?: EdgeType): Promise<Edge | undefined> {
    let q = this.deps.db.selectFrom('edges').selectAll().where('id', '=', id);
    if (type) q = q.where('type', '=', type);
    const row = await q.executeTakeFirst();
    return row && toEdge(row);
  }

  async list(type: EdgeType, page: PageRequest): Promise<Page<Edge>> {
    const result = await selectPage(
      this.deps.db.selectFrom('edges').selectAll().where('type', '=', type),
      page,
    );
    return { items: result.items.map(toEdge), nextBeforeId: result.nextBeforeId };
  }

  /** Every edge of `type`, oldest first, for the edge runtime. */
  async listAll(type: EdgeType): Promise<Edge[]> {
    const rows = await this.deps.db
      .selectFrom('edges')
      .selectAll()
      .where('type', '=', type)
      .orderBy('id')
      .execute();
    return rows.map(toEdge);
  }

  /**
   * Every edge (both types) that has at least one hostport, by id: the ones that can carry
   * traffic, which the edge runtime reloads every few seconds.
   */
  async listServing(): Promise<Edge[]> {
    const rows = await this.deps.db
      .selectFrom('edges')
      .selectAll()
      .where('hostports', 'is not', null)
      .orderBy('id')
      .execute();
    return rows.map(toEdge);
  }

  /**
   * The edge serving one of `hostports` (exact lowercase `host:port`), or undefined. The agent
   * edge refuses to bind such a name or address directly (ERR_NGROK_381).
   * @example await edges.edgeForHostport(['app.example.com:443']) // { edge_id: 'edgtls_…', hostport }
   */
  async edgeForHostport(
    hostports: readonly string[],
  ): Promise<{ edge_id: string; hostport: string } | undefined> {
    if (hostports.length === 0) return undefined;
    return this.deps.db
      .selectFrom('edge_hostports')
      .select(['edge_id', 'hostport'])
      .where('hostport', 'in', [...hostports])
      .orderBy('hostport')
      .executeTakeFirst();
  }

  /** PATCH: only what is sent changes. Undefined when there is no such edge. */
  async update(type: EdgeType, id: string, patch: EdgeInput): Promise<Edge | undefined> {
    const current = await this.get(id, type);
    if (!current) return undefined;
    const pending = this.apply(current, patch, 'patch');
    const nothingSent =
      pending.hostports === undefined &&
      pending.changed.length === 0 &&
      patch.description === undefined &&
      patch.metadata === undefined;
    return nothingSent ? current : this.save(pending, false);
  }

  /** Delete the edge with its hostports and references; false when absent. */
  async delete(type: EdgeType, id: string): Promise<boolean> {
    const deleted = await this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('edges')
        .select('id')
        .where('id', '=', id)
        .where('type', '=', type)
        .executeTakeFirst();
      if (!row) return false;
      await trx.deleteFrom('edge_hostports').where('edge_id', '=', id).execute();
      await clearRefs(trx, id);
      await trx.deleteFrom('edges').where('id', '=', id).execute();
      return true;
    });
    if (deleted) this.changes.emit('change', id);
    return deleted;
  }

  /** PUT one module: replace it whole. Undefined when there is no such edge. */
  async setModule<N extends ModuleName>(
    type: EdgeType,
    id: string,
    name: N,
    input: ModuleMutates[N],
  ): Promise<Edge | undefined> {
    this.checkModuleName(type, name);
    const current = await this.get(id, type);
    if (!current) return undefined;
    const module = normalizeModule(name, input, '', type, this.deps.validateTrafficPolicy);
    const edge: Edge = { ...current, [name]: module };
    return this.save({ edge, hostports: undefined, changed: [name] }, false, '');
  }

  /** DELETE one module; unset modules are fine. False when there is no such edge. */
  async deleteModule(type: EdgeType, id: string, name: ModuleName): Promise<boolean> {
    this.checkModuleName(type, name);
    const current = await this.get(id, type);
    if (!current) return false;
    if (current[name] === null) return true;
    if (name === 'tls_termination') checkTerminationRemoval(id, current);
    await this.save(
      { edge: { ...current, [name]: null }, hostports: undefined, changed: [] },
      false,
    );
    return true;
  }

  private checkModuleName(type: EdgeType, name: ModuleName): void {
    if (!EDGE_MODULES[type].includes(name)) throw new Error(`${type} edges have no ${name} module`);
  }

  /** Merge `input` into `edge`, running every check that needs no database. */
  private apply(edge: Edge, input: EdgeInput, mode: 'create' | 'patch'): PendingWrite {
    const next: Edge = { ...edge };
    if (input.description !== undefined) next.description = input.description;
    if (input.metadata !== undefined) next.metadata = input.metadata;
    const allowed = EDGE_MODULES[edge.type];
    const changed: ModuleName[] = [];
    for (const name of MODULE_COLUMNS) {
      const value = input[name];
      if (value === undefined) continue;
      if (!allowed.includes(name)) throw new UnknownFieldError(name, allowed);
      if (value === null) {
        if (mode === 'create') continue;
        throw new ValidationError(
          CODES.moduleRemovalInPatch,
          name,
          `A module cannot be removed by PATCH. Leave '${name}' out to keep it, or remove it with DELETE /edges/${edge.type}/${edge.id}/${name}.`,
        );
      }
      // Each module's value is checked against its own name, so the cast only restates that.
      (next as unknown as Record<string, unknown>)[name] = normalizeModule(
        name,
        value,
        `${name}.`,
        edge.type,
        this.deps.validateTrafficPolicy,
      );
      changed.push(name);
    }
    let hostports: string[] | undefined;
    if (input.hostports !== undefined) hostports = input.hostports ?? [];
    return { edge: next, hostports, changed };
  }

  /** Check references and hostports against the database and write everything atomically. */
  private async save(pending: PendingWrite, isNew: boolean, prefix?: FieldPrefix): Promise<Edge> {
    const { edge, changed } = pending;
    try {
      const saved = await this.deps.db.transaction().execute(async (trx) => {
        for (const name of changed) {
          // Each stored module is checked against its own name, as above.
          await checkModuleReferences(trx, name, edge[name] as never, prefix ?? `${name}.`);
        }
        if (edge.type === 'tls') checkTermination(edge.id, edge, changed);
        if (pending.hostports !== undefined) {
          const resolved = await resolveHostports(
            trx,
            edge.type,
            pending.hostports,
            this.deps.settings,
          );
          edge.hostports = resolved.length > 0 ? resolved.map((h) => h.hostport) : null;
          await this.writeRow(trx, edge, isNew);
          await replaceHostports(trx, edge.id, resolved);
        } else {
          await this.writeRow(trx, edge, isNew);
        }
        const targets = await trx
          .selectFrom('edge_hostports')
          .select('target_id')
          .where('edge_id', '=', edge.id)
          .execute();
        await setRefs(trx, edge.id, [...referencedIds(edge), ...targets.map((t) => t.target_id)]);
        return edge;
      });
      this.changes.emit('change', saved.id);
      return saved;
    } catch (err) {
      // Two writers raced for one hostport; the primary key let only one through.
      if (isUniqueViolation(err)) {
        throw new ConflictError(
          CODES.hostportTaken,
          'One of the hostports was taken by another edge while this edge was being saved; a hostport can be served by one edge only. Check the other edges and try again.',
        );
      }
      throw err;
    }
  }

  private async writeRow(trx: Transaction<Database>, edge: Edge, isNew: boolean): Promise<void> {
    const row = toRow(edge);
    if (isNew) {
      await trx.insertInto('edges').values(row).execute();
    } else {
      const { id, type: _type, created_at: _created, ...set } = row;
      await trx.updateTable('edges').set(set).where('id', '=', id).execute();
    }
  }
}
