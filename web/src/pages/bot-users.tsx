import { useState, type ReactNode } from 'react';
import { PageHeader, When } from '../components';
import { Checkbox, CreateForm, SelectField, TextField } from '../fields';
import { useList, useResource } from '../hooks';
import { ResourceTable } from '../resource';

export interface BotUser {
  id: string;
  name: string;
  active: boolean;
  created_at: string;
}

/** The owner of a new authtoken or SSH key: the account (the default) or a bot user. */
export function OwnerField({
  value,
  onChange,
  hint,
}: {
  value: string;
  onChange: (value: string) => void;
  hint?: ReactNode;
}) {
  const bots = useList<BotUser>('/bot_users', 'bot_users');
  return (
    <SelectField label="Owner" hint={hint} value={value} onChange={onChange}>
      <option value="">The account (default)</option>
      {bots.items?.map((b) => (
        <option key={b.id} value={b.id}>
          Bot user {b.name}
        </option>
      ))}
    </SelectField>
  );
}

/** Bot users: identities for machines, which own authtokens and API keys. */
export function BotUsersPage() {
  const bots = useResource<BotUser>('/bot_users', 'bot_users');
  const [name, setName] = useState('');
  const create = async () => {
    if (await bots.create({ name })) setName('');
  };
  return (
    <>
      <PageHeader title="Bot users">
        Machines and services get a bot user of their own; give it authtokens (Authtokens page) so
        that its agents can be told apart and switched off together.
      </PageHeader>
      <CreateForm
        label="Create a bot user"
        submit="Create bot user"
        action={bots.action}
        onSubmit={create}
      >
        <TextField label="Name" value={name} onChange={setName} required maxLength={255} />
      </CreateForm>
      <ResourceTable
        resource={bots}
        caption="Bot users"
        empty="No bot users yet. Create one for each fleet of agents, e.g. “sitea-agents”."
        columns={[
          { header: 'Name', cell: (b) => b.name },
          { header: 'ID', cell: (b) => <code>{b.id}</code> },
          {
            header: 'Active',
            cell: (b) => (
              <Checkbox
                className="switch"
                checked={b.active}
                onChange={(active) => void bots.update(b, { active })}
              >
                <span>{b.active ? 'Active' : 'Inactive'}</span>
              </Checkbox>
            ),
          },
          { header: 'Created', cell: (b) => <When iso={b.created_at} /> },
        ]}
        deleteName={(b) => `bot user ${b.name}`}
      />
    </>
  );
}
