import { CODES } from '../core/errors.js';
import { newId } from '../core/ids.js';
import {
  FAILOVER,
  STATIC,
  TUNNEL_GROUP,
  WEIGHTED,
  type Backend,
  type BackendKind,
  type BackendType,
  type CommonInput,
  type FailoverBackend,
  type FailoverConfig,
  type FailoverCreate,
  type FailoverUpdate,
  type StaticBackend,
  type StaticConfig,
  type StaticCreate,
  type StaticUpdate,
  type TunnelGroupBackend,
  type TunnelGroupConfig,
  type TunnelGroupCreate,
  type TunnelGroupUpdate,
  type WeightedBackend,
  type WeightedConfig,
  type WeightedCreate,
  type WeightedUpdate,
} from './backend-kinds.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, describedOf } from './described.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
import { clearRefs, refuseWhileReferenced, setRefs } from './refs.js';
import type { BackendsTable } from './schema.js';

export type * from './backend-kinds.js';

function toBackend<B extends Backend>(row: BackendsTable): B {
  return {
    id: row.id,
    type: row.type as BackendType,
    ...describedOf(row),
    ...(JSON.parse(row.config) as object),
  } as B;
}

/**
 * The five operations for one backend type. Rows of other types are invisible to it, so
 * `GET /backends/failover/<a tunnel group id>` is a 404.
 * @example await backends.tunnelGroups.create({ labels: { app: 'web' } })
 */
export class TypedBackendRepository<
  B extends Backend,
  Cfg,
  C extends CommonInput,
  U extends CommonInput,
> {
  constructor(
    private readonly deps: RepoDeps,
    private readonly kind: BackendKind<Cfg, C, U>,
  ) {}

  async create(input: C): Promise<B> {
    const id = newId(this.kind.prefix);
    return this.deps.db.transaction().execute(async (trx) => {
      const config = await this.kind.fromCreate(trx, id, input);
      const row: BackendsTable = {
        id,
        type: this.kind.type,
        ...describedColumns(input),
        config: JSON.stringify(config),
      };
      await trx.insertInto('backends').values(row).execute();
      await setRefs(trx, id, this.kind.members(config));
      return toBackend<B>(row);
    });
  }

  async get(id: string): Promise<B | undefined> {
    const row = await this.deps.db
      .selectFrom('backends')
      .selectAll()
      .where('id', '=', id)
      .where('type', '=', this.kind.type)
      .executeTakeFirst();
    return row && toBackend<B>(row);
  }

  async list(page: PageRequest): Promise<Page<B>> {
    const result = await selectPage(
      this.deps.db.selectFrom('backends').selectAll().where('type', '=', this.kind.type),
      page,
    );
    return { items: result.items.map((r) => toBackend<B>(r)), nextBeforeId: result.nextBeforeId };
  }

  /** Change the fields given; a map or list, when given, replaces the stored one whole. */
  async update(id: string, patch: U): Promise<B | undefined> {
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('backends')
        .selectAll()
        .where('id', '=', id)
        .where('type', '=', this.kind.type)
        .executeTakeFirst();
      if (!row) return undefined;
      const set: Partial<BackendsTable> = describedChanges(patch);
      const config = await this.kind.fromUpdate(trx, id, JSON.parse(row.config) as Cfg, patch);
      if (config !== undefined) {
        set.config = JSON.stringify(config);
        await setRefs(trx, id, this.kind.members(config));
      }
      if (Object.keys(set).length === 0) return toBackend<B>(row);
      await trx.updateTable('backends').set(set).where('id', '=', id).execute();
      return toBackend<B>({ ...row, ...set });
    });
  }

  /** Delete; false when absent. Refused (409 ERR_NGROK_6502) while a backend or edge uses it. */
  async delete(id: string): Promise<boolean> {
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('backends')
        .select('id')
        .where('id', '=', id)
        .where('type', '=', this.kind.type)
        .executeTakeFirst();
      if (!row) return false;
      await refuseWhileReferenced(
        trx,
        id,
        CODES.backendInUse,
        (by) =>
          `The backend ${id} is still used by ${by}. Remove it from ${by} first, then delete it.`,
      );
      await clearRefs(trx, id);
      await trx.deleteFrom('backends').where('id', '=', id).execute();
      return true;
    });
  }
}

/**
 * Backends of every type, stored in one table (type + JSON config). Each type has its own typed
 * repository; `get` and `exists` work across types, for edges that name a `backend_id`.
 * @example const tg = await backends.tunnelGroups.create({ labels: { app: 'web' } });
 * @example if (!(await backends.exists(id))) throw ...;
 */
export class BackendRepository {
  readonly tunnelGroups: TypedBackendRepository<
    TunnelGroupBackend,
    TunnelGroupConfig,
    TunnelGroupCreate,
    TunnelGroupUpdate
  >;
  readonly failovers: TypedBackendRepository<
    FailoverBackend,
    FailoverConfig,
    FailoverCreate,
    FailoverUpdate
  >;
  readonly weighted: TypedBackendRepository<
    WeightedBackend,
    WeightedConfig,
    WeightedCreate,
    WeightedUpdate
  >;
  readonly statics: TypedBackendRepository<StaticBackend, StaticConfig, StaticCreate, StaticUpdate>;

  constructor(private readonly deps: RepoDeps) {
    this.tunnelGroups = new TypedBackendRepository(deps, TUNNEL_GROUP);
    this.failovers = new TypedBackendRepository(deps, FAILOVER);
    this.weighted = new TypedBackendRepository(deps, WEIGHTED);
    this.statics = new TypedBackendRepository(deps, STATIC);
  }

  /** A backend of any type; `type` tells which, and tunnel groups carry `labels`. */
  async get(id: string): Promise<Backend | undefined> {
    const row = await this.deps.db
      .selectFrom('backends')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row && toBackend(row);
  }

  /** Whether a backend of any type has this id. */
  async exists(id: string): Promise<boolean> {
    const row = await this.deps.db
      .selectFrom('backends')
      .select('id')
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }
}
