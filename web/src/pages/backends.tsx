import {
  Chips,
  DeleteButton,
  EmptyState,
  ErrorMessage,
  labelPairs,
  PageHeader,
} from '../components';
import { useAction, useList } from '../hooks';
import { CreateBackend, memberName } from './backend-form';

export interface Backend {
  id: string;
  description: string;
  labels?: Record<string, string>;
  tunnels?: Array<{ id: string }>;
  /** Failover: ids in order; weighted: id → weight. */
  backends?: string[] | Record<string, number>;
  address?: string;
  tls?: { enabled: boolean };
}

const KINDS = [
  { kind: 'tunnel_group', name: 'Tunnel group', what: 'online tunnels whose labels match' },
  { kind: 'failover', name: 'Failover', what: 'other backends, tried in order' },
  { kind: 'weighted', name: 'Weighted', what: 'other backends, by weight' },
  { kind: 'static', name: 'Static address', what: 'a fixed host:port' },
] as const;

export type BackendKind = (typeof KINDS)[number]['kind'];

/** Every backend of every kind, for the edge form too. */
export function useBackends() {
  const lists = KINDS.map((k) => ({
    ...k,
    list: useList<Backend>(`/backends/${k.kind}`, 'backends'),
  }));
  const reload = async () => {
    await Promise.all(lists.map((l) => l.list.reload()));
  };
  return { lists, reload };
}

/** The members of a failover backend (in order) or a weighted one (with their weights). */
function Members({ backends }: { backends: string[] | Record<string, number> }) {
  const values = Array.isArray(backends)
    ? backends.map((id, i) => `${i + 1}. ${id}`)
    : Object.entries(backends).map(([id, w]) => `${id} × ${w}`);
  return (
    <div>
      <Chips values={values} />
    </div>
  );
}

/** Backends: where edges send traffic. Tunnel groups pick online tunnels by label. */
export function BackendsPage() {
  const { lists, reload } = useBackends();
  // Shared by the delete buttons: a refused delete (still in use) shows its message once.
  const action = useAction();
  const empty = lists.every((l) => l.list.items?.length === 0);
  return (
    <>
      <PageHeader title="Backends">
        A backend says where an edge sends its traffic. A tunnel group sends it to the online
        tunnels whose labels match, e.g. agents started with <code>--label app=ssh</code>.
      </PageHeader>
      <CreateBackend
        members={lists.flatMap(({ name, list }) =>
          (list.items ?? []).map((b) => ({ id: b.id, name: memberName(name, b) })),
        )}
        onCreated={reload}
      />
      <ErrorMessage error={action.error} />
      {empty ? (
        <EmptyState>
          No backends yet. Create a tunnel group for the labels your agents use.
        </EmptyState>
      ) : null}
      {lists.map(({ kind, name, what, list }) =>
        list.items && list.items.length > 0 ? (
          <section key={kind} className="card" aria-label={`${name} backends`}>
            <h2>
              {name} <span className="muted">— {what}</span>
            </h2>
            <ErrorMessage error={list.error} />
            <ul className="rows">
              {list.items.map((b) => (
                <li key={b.id}>
                  <div>
                    <strong>{b.description || b.id}</strong> <code className="muted">{b.id}</code>
                    {b.labels ? (
                      <div>
                        <Chips values={labelPairs(b.labels)} />{' '}
                        <span className="muted">{b.tunnels?.length ?? 0} tunnel(s) online</span>
                      </div>
                    ) : null}
                    {b.address ? (
                      <div>
                        <code>{b.address}</code>
                        {b.tls?.enabled ? <span className="badge">TLS</span> : null}
                      </div>
                    ) : null}
                    {b.backends ? <Members backends={b.backends} /> : null}
                  </div>
                  <DeleteButton
                    name={`backend ${b.description || b.id}`}
                    onDelete={() =>
                      action.send('DELETE', `/backends/${kind}/${b.id}`, undefined, list.reload)
                    }
                  />
                </li>
              ))}
            </ul>
          </section>
        ) : null,
      )}
    </>
  );
}
