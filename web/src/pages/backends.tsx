import { useState } from 'react';
import {
  Chips,
  DeleteButton,
  EmptyState,
  ErrorMessage,
  labelPairs,
  PageHeader,
} from '../components';
import { CreateForm, TextField } from '../fields';
import { useAction, useList } from '../hooks';

export interface Backend {
  id: string;
  description: string;
  labels?: Record<string, string>;
  tunnels?: Array<{ id: string }>;
  backends?: string[];
  address?: string;
}

const KINDS = [
  { kind: 'tunnel_group', name: 'Tunnel group', what: 'online tunnels whose labels match' },
  { kind: 'failover', name: 'Failover', what: 'other backends, tried in order' },
  { kind: 'weighted', name: 'Weighted', what: 'other backends, by weight' },
  { kind: 'static', name: 'Static address', what: 'a fixed host:port' },
] as const;

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

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const part of text.split(/[\n,]/)) {
    const t = part.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    labels[eq < 0 ? t : t.slice(0, eq).trim()] = eq < 0 ? '' : t.slice(eq + 1).trim();
  }
  return labels;
}

/** Backends: where edges send traffic. Tunnel groups pick online tunnels by label. */
export function BackendsPage() {
  const { lists, reload } = useBackends();
  const [labels, setLabels] = useState('');
  const [description, setDescription] = useState('');
  const action = useAction();
  const create = async () => {
    const body = { description, labels: parseLabels(labels) };
    if (!(await action.send('POST', '/backends/tunnel_group', body, reload))) return;
    setLabels('');
    setDescription('');
  };
  const empty = lists.every((l) => l.list.items?.length === 0);
  return (
    <>
      <PageHeader title="Backends">
        A backend says where an edge sends its traffic. A tunnel group sends it to the online
        tunnels whose labels match, e.g. agents started with <code>--label app=ssh</code>.
      </PageHeader>
      <CreateForm
        label="Create a tunnel group backend"
        submit="Create tunnel group"
        action={action}
        onSubmit={create}
      >
        <TextField
          label="Labels"
          hint="key=value pairs, separated by commas, e.g. app=ssh"
          value={labels}
          onChange={setLabels}
          required
        />
        <TextField
          label="Description"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
      </CreateForm>
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
                      </div>
                    ) : null}
                    {b.backends ? <div className="muted">{b.backends.join(', ')}</div> : null}
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
