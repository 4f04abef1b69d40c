import {
  sql,
  type ColumnDefinitionBuilder,
  type CreateTableBuilder,
  type Kysely,
  type Migration,
  type RawBuilder,
} from 'kysely';
import type { Dialect } from '../database.js';

/** A table being created. */
export type Table = CreateTableBuilder<string, never>;

/** What every migration builds its tables from. */
export interface SchemaKit {
  /**
   * The type of ids and of columns that hold one: compared byte-wise (COLLATE "C" on PostgreSQL;
   * SQLite's default), so `ORDER BY id` is creation order on both databases (before_id paging
   * relies on it).
   */
  idType: RawBuilder<unknown>;
  pk: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
  notNull: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
  /** NOT NULL UNIQUE. */
  unique: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
  /** NOT NULL, referencing `table`'s id, deleted with that row. */
  cascadesFrom: (table: string) => (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;
  /** The `id` primary key, first column. */
  withId: (t: Table) => Table;
  /**
   * The columns every API resource starts with: id, description, metadata, created_at (and
   * updated_at when asked for), in that order.
   */
  resource: (t: Table, options?: { updatedAt?: boolean }) => Table;
  /** Create the index `name` on `table` over `columns`. */
  index: (db: Kysely<unknown>, name: string, table: string, columns: string[]) => Promise<void>;
}

/**
 * The building blocks the migrations share. Migrations are history: changing what a helper here
 * emits changes the schema of every database created afterwards but not of existing ones, so the
 * DDL each one produces must stay as it is.
 *
 * @example
 * export function widgetsMigration(dialect: Dialect): Migration {
 *   const { idType, notNull, cascadesFrom, resource, index } = schemaKit(dialect);
 *   return forwardOnly(async (db) => {
 *     await resource(db.schema.createTable('widgets'))
 *       .addColumn('owner_id', idType, cascadesFrom('owners'))
 *       .addColumn('color', 'text', notNull)
 *       .execute();
 *     await index(db, 'widgets_owner', 'widgets', ['owner_id']);
 *   });
 * }
 */
export function schemaKit(dialect: Dialect): SchemaKit {
  const idType = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const pk = (c: ColumnDefinitionBuilder) => c.primaryKey();
  const notNull = (c: ColumnDefinitionBuilder) => c.notNull();
  const notNullDefaultEmpty = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo('');
  const withId = (t: Table): Table => t.addColumn('id', idType, pk);
  return {
    idType,
    pk,
    notNull,
    unique: (c) => c.notNull().unique(),
    cascadesFrom: (table) => (c) => c.notNull().references(`${table}.id`).onDelete('cascade'),
    withId,
    resource(t, { updatedAt = false } = {}) {
      const base = withId(t)
        .addColumn('description', 'text', notNullDefaultEmpty)
        .addColumn('metadata', 'text', notNullDefaultEmpty)
        .addColumn('created_at', 'text', notNull);
      return updatedAt ? base.addColumn('updated_at', 'text', notNull) : base;
    },
    async index(db, name, table, columns) {
      await db.schema.createIndex(name).on(table).columns(columns).execute();
    },
  };
}

/**
 * A migration with no way back: Burrow's schema only moves forward, and going back means
 * restoring a backup.
 */
export function forwardOnly(up: (db: Kysely<unknown>) => Promise<void>): Migration {
  return {
    up,
    async down(): Promise<void> {
      throw new Error('Burrow migrations are forward-only; restore a backup to go back.');
    },
  };
}
