import type { ReactNode } from 'react';
import { DeleteButton, EmptyState, ErrorMessage } from './components';

/**
 * A loaded list: its load error, then `empty` (what the thing is and what to do next) when it has
 * nothing, otherwise what `children` draws of the items (none while they are loading).
 */
export function ResourceList<T>({
  items,
  error,
  empty,
  children,
}: {
  items: T[] | undefined;
  error: string | undefined;
  empty: ReactNode;
  children: (items: T[]) => ReactNode;
}) {
  return (
    <>
      <ErrorMessage error={error} />
      {items?.length === 0 ? <EmptyState>{empty}</EmptyState> : children(items ?? [])}
    </>
  );
}

/** One column of a {@link ResourceTable}: its header and what a row shows in it. */
export interface Column<T> {
  header: string;
  cell: (item: T) => ReactNode;
}

/**
 * A resource list as a table, each row with a delete button (asking once more) at its end, unless
 * `deleteName` gives none for it (a row the API will not delete), after the row's other buttons
 * (`actions`, e.g. an edit button). The caption names the table for screen readers; the header row
 * is kept while the list loads.
 * @example <ResourceTable resource={bots} caption="Bot users" empty="No bot users yet." columns={[{ header: 'Name', cell: (b) => b.name }]} deleteName={(b) => `bot user ${b.name}`} />
 */
export function ResourceTable<T extends { id: string }>({
  resource,
  caption,
  empty,
  columns,
  deleteName,
  actions,
}: {
  resource: {
    items: T[] | undefined;
    error: string | undefined;
    remove: (item: T) => Promise<unknown>;
  };
  caption: string;
  empty: ReactNode;
  columns: Array<Column<T>>;
  /** What the delete button of a row names, e.g. `bot user sitea-agents`; undefined for no button. */
  deleteName: (item: T) => string | undefined;
  /** Buttons before a row's delete button, e.g. its edit button. */
  actions?: (item: T) => ReactNode;
}) {
  const remove = (item: T) => (
    <RowDelete name={deleteName(item)} onDelete={() => resource.remove(item)} />
  );
  return (
    <ResourceList items={resource.items} error={resource.error} empty={empty}>
      {(items) => (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">{caption}</caption>
            <thead>
              <tr>
                {columns.map((c) => (
                  <th key={c.header} scope="col">
                    {c.header}
                  </th>
                ))}
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((item) => (
                <tr key={item.id}>
                  {columns.map((c) => (
                    <td key={c.header}>{c.cell(item)}</td>
                  ))}
                  <td>
                    {actions ? (
                      <span className="actions">
                        {actions(item)}
                        {remove(item)}
                      </span>
                    ) : (
                      remove(item)
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </ResourceList>
  );
}

function RowDelete({
  name,
  onDelete,
}: {
  name: string | undefined;
  onDelete: () => Promise<unknown>;
}) {
  return name === undefined ? null : <DeleteButton name={name} onDelete={onDelete} />;
}

/**
 * One resource as a card: a region named `label`, a heading with the card's buttons (`actions`,
 * usually its delete button) beside it, then its details.
 */
export function ResourceCard({
  label,
  title,
  actions,
  children,
}: {
  label: string;
  title: ReactNode;
  actions: ReactNode;
  children: ReactNode;
}) {
  return (
    <section className="card" aria-label={label}>
      <div className="card-head">
        <h2>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}
