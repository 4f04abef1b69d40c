import { useState, type FormEvent } from 'react';
import { api } from '../api';
import {
  CopyButton,
  DeleteButton,
  EmptyState,
  ErrorMessage,
  Field,
  PageHeader,
  useAction,
  useList,
} from '../components';

export interface ReservedAddr {
  id: string;
  addr: string;
  description: string;
  region: string;
}

/** TCP addresses: reserved host:port pairs for TCP edges and tcp tunnels. */
export function AddressesPage() {
  const addrs = useList<ReservedAddr>('/reserved_addrs', 'reserved_addrs');
  const [description, setDescription] = useState('');
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (
      await action.run(async () => {
        await api('POST', '/reserved_addrs', { description });
        await addrs.reload();
      })
    )
      setDescription('');
  };
  return (
    <>
      <PageHeader title="TCP addresses">
        A reserved address is a public host:port that stays yours: point a TCP edge at it, or bind a
        tcp tunnel to it from an agent.
      </PageHeader>
      <form
        className="card inline-form"
        onSubmit={(e) => void create(e)}
        aria-label="Reserve a TCP address"
      >
        <Field label="Description" hint="e.g. “ssh to the build box”. The port is picked for you.">
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
          Reserve an address
        </button>
        <ErrorMessage error={action.error} />
      </form>
      <ErrorMessage error={addrs.error} />
      {addrs.items?.length === 0 ? (
        <EmptyState>
          No TCP addresses yet. Reserve one, then create a TCP edge on it (Edges page).
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">TCP addresses</caption>
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">Description</th>
                <th scope="col">ID</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {addrs.items?.map((a) => (
                <tr key={a.id}>
                  <td>
                    <code>{a.addr}</code> <CopyButton text={a.addr} label={`Copy ${a.addr}`} />
                  </td>
                  <td>{a.description}</td>
                  <td>
                    <code>{a.id}</code>
                  </td>
                  <td>
                    <DeleteButton
                      name={`address ${a.addr}`}
                      onDelete={() =>
                        action
                          .run(async () => {
                            await api('DELETE', `/reserved_addrs/${a.id}`);
                            await addrs.reload();
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
