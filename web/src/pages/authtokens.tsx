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
import type { BotUser } from './bot-users';

interface Credential {
  id: string;
  description: string;
  owner_id: string;
  acl: string[];
  created_at: string;
  token: string | null;
}

/** Authtokens: what agents connect with, each owned by a user or bot user, limited by its ACL. */
export function AuthtokensPage() {
  const creds = useList<Credential>('/credentials', 'credentials');
  const bots = useList<BotUser>('/bot_users', 'bot_users');
  const [description, setDescription] = useState('');
  const [owner, setOwner] = useState('');
  const [acl, setAcl] = useState<string[]>([]);
  const [rule, setRule] = useState('');
  const [created, setCreated] = useState<Credential | undefined>(undefined);
  const action = useAction();

  const addRule = () => {
    const r = rule.trim();
    if (r === '') return;
    setAcl((list) => (list.includes(r) ? list : [...list, r]));
    setRule('');
  };
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const pending = rule.trim() ? [...acl, rule.trim()] : acl;
    const ok = await action.run(async () => {
      setCreated(
        await api<Credential>('POST', '/credentials', {
          description,
          acl: pending,
          ...(owner ? { owner_id: owner } : {}),
        }),
      );
      await creds.reload();
    });
    if (ok) {
      setDescription('');
      setAcl([]);
      setRule('');
    }
  };
  const ownerName = (id: string) => bots.items?.find((b) => b.id === id)?.name ?? id;

  return (
    <>
      <PageHeader title="Authtokens">
        Agents connect with an authtoken. Its ACL limits what they may serve; the token itself is
        shown once, when it is created.
      </PageHeader>
      {created?.token ? (
        <ShownOnce what="authtoken" secret={created.token} onDone={() => setCreated(undefined)} />
      ) : null}
      <form className="card" onSubmit={(e) => void create(e)} aria-label="Create an authtoken">
        <h2>New authtoken</h2>
        <Field label="Description">
          {(p) => (
            <input
              {...p}
              value={description}
              onChange={(e) => setDescription(e.target.value)}
              maxLength={255}
            />
          )}
        </Field>
        <Field
          label="Owner"
          hint="A bot user keeps a fleet's tokens together; deactivating it stops them all."
        >
          {(p) => (
            <select {...p} value={owner} onChange={(e) => setOwner(e.target.value)}>
              <option value="">The account (default)</option>
              {bots.items?.map((b) => (
                <option key={b.id} value={b.id}>
                  Bot user {b.name}
                </option>
              ))}
            </select>
          )}
        </Field>
        <fieldset className="acl-editor">
          <legend>Access rules (ACL)</legend>
          <p className="hint" id="acl-help">
            With no rules the token may bind anything. Each rule allows some binds:{' '}
            <code>bind:app.example.com</code> exactly that name;{' '}
            <code>bind:*.sitea.example.com</code> every name under sitea.example.com;{' '}
            <code>bind:tcp.example.com:20001</code> one TCP address; <code>bind:app=web</code>{' '}
            labeled tunnels with that label (<code>*</code> on either side); <code>bind:*</code>{' '}
            anything. Once there is a rule, binds no rule allows are refused.
          </p>
          {acl.length > 0 ? (
            <ul className="acl-list" aria-label="Rules">
              {acl.map((r) => (
                <li key={r}>
                  <code>{r}</code>
                  <button
                    type="button"
                    className="secondary"
                    onClick={() => setAcl((l) => l.filter((x) => x !== r))}
                    aria-label={`Remove rule ${r}`}
                  >
                    Remove
                  </button>
                </li>
              ))}
            </ul>
          ) : null}
          <div className="inline-form">
            <Field label="Rule">
              {(p) => (
                <input
                  {...p}
                  aria-describedby="acl-help"
                  value={rule}
                  placeholder="bind:*.example.com"
                  onChange={(e) => setRule(e.target.value)}
                  onKeyDown={(e) => {
                    if (e.key === 'Enter') {
                      e.preventDefault();
                      addRule();
                    }
                  }}
                />
              )}
            </Field>
            <button type="button" className="secondary" onClick={addRule}>
              Add rule
            </button>
          </div>
        </fieldset>
        <button type="submit" disabled={action.busy}>
          Create authtoken
        </button>
        <ErrorMessage error={action.error} />
      </form>
      <ErrorMessage error={creds.error} />
      {creds.items?.length === 0 ? (
        <EmptyState>
          No authtokens yet. Create one, then start an agent with it:{' '}
          <code>burrow agent --authtoken &lt;token&gt;</code>.
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">Authtokens</caption>
            <thead>
              <tr>
                <th scope="col">Description</th>
                <th scope="col">Owner</th>
                <th scope="col">ACL</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {creds.items?.map((c) => (
                <tr key={c.id}>
                  <td>{c.description || <code>{c.id}</code>}</td>
                  <td>{ownerName(c.owner_id)}</td>
                  <td>
                    {c.acl.length ? (
                      c.acl.map((r) => (
                        <code key={r} className="chip">
                          {r}
                        </code>
                      ))
                    ) : (
                      <span className="muted">anything</span>
                    )}
                  </td>
                  <td>
                    <When iso={c.created_at} />
                  </td>
                  <td>
                    <DeleteButton
                      name={`authtoken ${c.description || c.id}`}
                      onDelete={() =>
                        action
                          .run(async () => {
                            await api('DELETE', `/credentials/${c.id}`);
                            await creds.reload();
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
