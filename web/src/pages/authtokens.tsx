import { useState } from 'react';
import { Chips, PageHeader, ShownOnce, When } from '../components';
import { CreateForm, TextField } from '../fields';
import { useOwnerName, useResource } from '../hooks';
import { ResourceTable } from '../resource';
import { OwnerField } from './bot-users';

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
  const creds = useResource<Credential>('/credentials', 'credentials');
  const [description, setDescription] = useState('');
  const [owner, setOwner] = useState('');
  const [acl, setAcl] = useState<string[]>([]);
  const [rule, setRule] = useState('');
  const [created, setCreated] = useState<Credential | undefined>(undefined);

  const addRule = () => {
    const r = rule.trim();
    if (r === '') return;
    setAcl((list) => (list.includes(r) ? list : [...list, r]));
    setRule('');
  };
  const create = async () => {
    // A rule typed but not added yet is meant too.
    const pending = rule.trim() ? [...acl, rule.trim()] : acl;
    const token = await creds.create({
      description,
      acl: pending,
      ...(owner ? { owner_id: owner } : {}),
    });
    if (!token) return;
    setCreated(token);
    setDescription('');
    setAcl([]);
    setRule('');
  };
  const ownerName = useOwnerName();

  return (
    <>
      <PageHeader title="Authtokens">
        Agents connect with an authtoken. Its ACL limits what they may serve; the token itself is
        shown once, when it is created.
      </PageHeader>
      {created?.token ? (
        <ShownOnce what="authtoken" secret={created.token} onDone={() => setCreated(undefined)} />
      ) : null}
      <CreateForm
        className="card"
        title="New authtoken"
        label="Create an authtoken"
        submit="Create authtoken"
        action={creds.action}
        onSubmit={create}
      >
        <TextField
          label="Description"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
        <OwnerField
          hint="A bot user keeps a fleet's tokens together; deactivating it stops them all."
          value={owner}
          onChange={setOwner}
        />
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
            <TextField
              label="Rule"
              aria-describedby="acl-help"
              value={rule}
              placeholder="bind:*.example.com"
              onChange={setRule}
              onKeyDown={(e) => {
                // Enter adds the rule instead of submitting the whole form.
                if (e.key === 'Enter') {
                  e.preventDefault();
                  addRule();
                }
              }}
            />
            <button type="button" className="secondary" onClick={addRule}>
              Add rule
            </button>
          </div>
        </fieldset>
      </CreateForm>
      <ResourceTable
        resource={creds}
        caption="Authtokens"
        empty={
          <>
            No authtokens yet. Create one, then start an agent with it:{' '}
            <code>burrow agent --authtoken &lt;token&gt;</code>.
          </>
        }
        columns={[
          { header: 'Description', cell: (c) => c.description || <code>{c.id}</code> },
          { header: 'Owner', cell: (c) => ownerName(c.owner_id) },
          {
            header: 'ACL',
            cell: (c) =>
              c.acl.length ? <Chips values={c.acl} /> : <span className="muted">anything</span>,
          },
          { header: 'Created', cell: (c) => <When iso={c.created_at} /> },
        ]}
        deleteName={(c) => `authtoken ${c.description || c.id}`}
      />
    </>
  );
}
