import { useState, type FormEvent } from 'react';
import { api } from '../api';
import {
  DeleteButton,
  EmptyState,
  ErrorMessage,
  Field,
  PageHeader,
  ShownOnce,
  useAction,
  useList,
  When,
} from '../components';

interface ApiKey {
  id: string;
  description: string;
  owner_id: string;
  created_at: string;
  token: string | null;
}

/** API keys: create (the key shown once), list, delete. */
export function ApiKeysPage() {
  const keys = useList<ApiKey>('/api_keys', 'keys');
  const [description, setDescription] = useState('');
  const [created, setCreated] = useState<ApiKey | undefined>(undefined);
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    await action.run(async () => {
      setCreated(await api<ApiKey>('POST', '/api_keys', { description }));
      setDescription('');
      await keys.reload();
    });
  };
  return (
    <>
      <PageHeader title="API keys">
        Keys for the REST API and the <code>burrow</code> CLI: send one as{' '}
        <code>Authorization: Bearer &lt;key&gt;</code>. A key is shown once, when it is created.
      </PageHeader>
      {created?.token ? (
        <ShownOnce what="API key" secret={created.token} onDone={() => setCreated(undefined)} />
      ) : null}
      <form
        className="card inline-form"
        onSubmit={(e) => void create(e)}
        aria-label="Create an API key"
      >
        <Field label="Description" hint="What uses this key, e.g. “CI deploys”.">
          {(p) => (
            <input
              {...p}
              value={description}
              onChange={(e) => setDescription(e.target.value)}
              maxLength={255}
            />
          )}
        </Field>
        <button type="submit" disabled={action.busy}>
          Create API key
        </button>
        <ErrorMessage error={action.error} />
      </form>
      <ErrorMessage error={keys.error} />
      {keys.items?.length === 0 ? (
        <EmptyState>No API keys yet. Create one above to use the API or the CLI.</EmptyState>
      ) : (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">API keys</caption>
            <thead>
              <tr>
                <th scope="col">Description</th>
                <th scope="col">ID</th>
                <th scope="col">Owner</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.items?.map((k) => (
                <tr key={k.id}>
                  <td>{k.description || <span className="muted">(none)</span>}</td>
                  <td>
                    <code>{k.id}</code>
                  </td>
                  <td>
                    <code>{k.owner_id}</code>
                  </td>
                  <td>
                    <When iso={k.created_at} />
                  </td>
                  <td>
                    <DeleteButton
                      name={`API key ${k.description || k.id}`}
                      onDelete={() =>
                        action
                          .run(async () => {
                            await api('DELETE', `/api_keys/${k.id}`);
                            await keys.reload();
                          })
                          .then(() => undefined)
                      }
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
