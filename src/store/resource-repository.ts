import type { Kysely, Selectable, SelectQueryBuilder, Updateable } from 'kysely';
import { selectPage, type Page, type PageRequest } from './paging.js';
import type { Database } from './schema.js';

/**
 * How this class sees a database: tables keyed by `id`, which every resource table is. The table
 * and its columns are generic here, so the queries below are built over this view; the subclass's
 * type arguments are what checks the rows and the columns it writes.
 */
type IdKeyed = Record<string, { id: string }>;

/** The row of `TB` as a select of all its columns returns it, for schema.ts's tables. */
type RowOf<TB> = TB extends keyof Database ? Selectable<Database[TB]> & { id: string } : never;

/**
 * How many rows `table` holds.
 * @example if ((await countRows(db, 'users')) === 0) offerFirstUserSetup();
 */
export async function countRows(db: Kysely<Database>, table: keyof Database): Promise<number> {
  const row = await db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  // PostgreSQL answers a count as a bigint string; Number() reads either database's answer.
  return Number(row.n);
}

/**
 * The base of a repository over one id-keyed resource table. It gives `get` and `list` (newest
 * first, in pages), which read the table's rows (or only `columns`) and show each through
 * `toView`; the subclass's own update and delete use `writeColumns` and `deleteRow`.
 * `Row` is what the select returns: the whole row (the default, for schema.ts's tables), or the
 * `columns` picked from it.
 * @example
 * class VaultRepository extends ResourceRepository<'vaults', Vault> {
 *   constructor(deps: RepoDeps) {
 *     super(deps.db, 'vaults', (row) => row);
 *   }
 * }
 */
export class ResourceRepository<
  TB extends keyof DB & string,
  View,
  Row extends { id: string } = RowOf<TB>,
  DB = Database,
> {
  constructor(
    protected readonly db: Kysely<DB>,
    private readonly table: TB,
    private readonly toView: (row: Row) => View,
    private readonly columns?: readonly (keyof Row & string)[],
  ) {}

  async get(id: string): Promise<View | undefined> {
    const row = await this.row(id);
    return row && this.toView(row);
  }

  async list(page: PageRequest): Promise<Page<View>> {
    const result = await selectPage(this.select(), page);
    return {
      items: result.items.map((row) => this.toView(row)),
      nextBeforeId: result.nextBeforeId,
    };
  }

  /**
   * A PATCH's write: set the columns in `set` on row `id`, or do nothing when `set` is empty (an
   * empty PATCH changes nothing). A failed write throws what `mapError` makes of it (by default
   * the error itself). Returns whether it sent an UPDATE (true also when no row has that id).
   * @example if (await this.writeColumns(id, set, (err) => nameTaken(err))) emitChange(id);
   */
  protected async writeColumns(
    id: string,
    set: Updateable<DB[TB]>,
    mapError: (err: unknown) => unknown = (err) => err,
  ): Promise<boolean> {
    if (Object.keys(set).length === 0) return false;
    const table: string = this.table;
    try {
      await this.idKeyed()
        .updateTable(table)
        .set(set as never)
        .where('id', '=', id)
        .execute();
    } catch (err) {
      throw await mapError(err);
    }
    return true;
  }

  /**
   * Delete row `id` (in `db`, e.g. a transaction that first checked nothing uses it); false when
   * there was no such row.
   * @example async delete(id: string) { return this.deleteRow(id); }
   */
  protected async deleteRow(id: string, db: Kysely<DB> = this.db): Promise<boolean> {
    const table: string = this.table;
    const res = await this.idKeyed(db).deleteFrom(table).where('id', '=', id).executeTakeFirst();
    return res.numDeletedRows > 0n;
  }

  /**
   * Delete row `id` in one transaction, after `check` did not refuse (it throws, e.g. a 409 while
   * something uses the row); false when there is no such row. `check` runs whether or not the
   * row exists, so a check that needs the row uses deleteCheckedRow and the others cost
   * no extra SELECT.
   * @example return this.deleteChecked(id, (trx) => refuseWhileReferenced(trx, id, CODES.caInUse, (by) => `used by ${by}`));
   */
  protected async deleteChecked(
    id: string,
    check: (trx: Kysely<DB>) => Promise<void>,
  ): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      await check(trx);
      return this.deleteRow(id, trx);
    });
  }

  /**
   * deleteChecked for a check that needs the row (to name it in a refusal): `check` runs with the
   * row read in the same transaction, and not at all when there is no such row.
   * @example return this.deleteCheckedRow(id, (trx, row) => refuseWhileEdgeUses(trx, id, CODES.addrInUse, `The reserved address ${row.addr}`, use));
   */
  protected async deleteCheckedRow(
    id: string,
    check: (trx: Kysely<DB>, row: Row) => Promise<void>,
  ): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      const row = await this.row(id, trx);
      if (row) await check(trx, row);
    });
  }

  /** Row `id` as the select reads it (in `db`, e.g. a transaction), or undefined. */
  protected async row(id: string, db: Kysely<DB> = this.db): Promise<Row | undefined> {
    return this.select(db).where('id', '=', id).executeTakeFirst();
  }

  private select(db: Kysely<DB> = this.db): SelectQueryBuilder<IdKeyed, string, Row> {
    const table: string = this.table;
    const from = this.idKeyed(db).selectFrom(table);
    const query = this.columns ? from.select(this.columns as never) : from.selectAll();
    return query as unknown as SelectQueryBuilder<IdKeyed, string, Row>;
  }

  private idKeyed(db: Kysely<DB> = this.db): Kysely<IdKeyed> {
    return db as unknown as Kysely<IdKeyed>;
  }
}
