import { useState, type FormEvent } from 'react';
import { api } from '../api';
import {
  DeleteButton,
  EmptyState,
  ErrorMessage,
  Field,
  PageHeader,
  useAction,
  useList,
  When,
} from '../components';

export interface BotUser {
  id: string;
  name: string;
  active: boolean;
  created_at: string;
}

/** Bot users: identities for machines, which own authtokens and API keys. */
export function BotUsersPage() {
  const bots = useList<BotUser>('/bot_users', 'bot_users');
  const [name, setName] = useState('');
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (
      await action.run(async () => {
        await api('POST', '/bot_users', { name });
        await bots.reload();
      })
    )
      setName('');
  };
  const setActive = (b: BotUser, active: boolean) =>
    action.run(async () => {
      await api('PATCH', `/bot_users/${b.id}`, { active });
      await bots.reload();
    });
  return (
    <>
      <PageHeader title="Bot users">
        Machines and services get a bot user of their own; give it authtokens (Authtokens page) so
        that its agents can be told apart and switched off together.
      </PageHeader>
      <form
        className="card inline-form"
        onSubmit={(e) => void create(e)}
        aria-label="Create a bot user"
      >
        <Field label="Name">
          {(p) => (
            <input
              {...p}
              value={name}
              onChange={(e) => setName(e.target.value)}
              required
              maxLength={255}
            />
          )}
        </Field>
        <button type="submit" disabled={action.busy}>
          Create bot user
        </button>
        <ErrorMessage error={action.error} />
      </form>
      <ErrorMessage error={bots.error} />
      {bots.items?.length === 0 ? (
        <EmptyState>
          No bot users yet. Create one for each fleet of agents, e.g. “sitea-agents”.
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">Bot users</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">ID</th>
                <th scope="col">Active</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {bots.items?.map((b) => (
                <tr key={b.id}>
                  <td>{b.name}</td>
                  <td>
                    <code>{b.id}</code>
                  </td>
                  <td>
                    <label className="switch">
                      <input
                        type="checkbox"
                        checked={b.active}
                        onChange={(e) => void setActive(b, e.target.checked)}
                      />
                      <span>{b.active ? 'Active' : 'Inactive'}</span>
                    </label>
                  </td>
                  <td>
                    <When iso={b.created_at} />
                  </td>
                  <td>
                    <DeleteButton
                      name={`bot user ${b.name}`}
                      onDelete={() =>
                        action
                          .run(async () => {
                            await api('DELETE', `/bot_users/${b.id}`);
                            await bots.reload();
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
