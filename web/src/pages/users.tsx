import { useState } from 'react';
import { PageHeader, When } from '../components';
import { CreateForm, SelectField, TextField } from '../fields';
import { useResource } from '../hooks';
import { ResourceTable } from '../resource';
import type { Role } from '../role';

export interface DashboardUser {
  id: string;
  name: string;
  role: Role;
  created_at: string;
}

const ROLE_OPTIONS: ReadonlyArray<[Role, string]> = [
  ['viewer', 'Viewer: reads everything but users and the audit trail, changes nothing'],
  ['operator', 'Operator: manages tunnels, endpoints, edges, domains and policies'],
  ['admin', 'Admin: everything, users and every API key included'],
];

function RoleOptions() {
  return (
    <>
      {ROLE_OPTIONS.map(([role, text]) => (
        <option key={role} value={role}>
          {text}
        </option>
      ))}
    </>
  );
}

/** Users (admins only): the people who sign in, with their roles. */
export function UsersPage() {
  const users = useResource<DashboardUser>('/users', 'users');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const create = async () => {
    if (await users.create({ name, password, role })) {
      setName('');
      setPassword('');
    }
  };
  return (
    <>
      <PageHeader title="Users">
        The people who sign in to this dashboard. A role holds from the person&apos;s next click,
        for their API keys too.
      </PageHeader>
      <CreateForm label="Add a user" submit="Add user" action={users.action} onSubmit={create}>
        <TextField label="Name" value={name} onChange={setName} required maxLength={64} />
        <TextField
          label="Password"
          type="password"
          value={password}
          onChange={setPassword}
          required
          minLength={8}
          autoComplete="new-password"
          hint="At least 8 characters; tell it to the person, who cannot change it yet."
        />
        <SelectField label="Role" value={role} onChange={(r) => setRole(r as Role)}>
          <RoleOptions />
        </SelectField>
      </CreateForm>
      <ResourceTable
        resource={users}
        caption="Users"
        empty="No users."
        columns={[
          { header: 'Name', cell: (u) => u.name },
          {
            header: 'Role',
            cell: (u) => (
              <select
                aria-label={`Role of ${u.name}`}
                value={u.role}
                onChange={(e) => void users.update(u, { role: e.target.value })}
              >
                <option value="viewer">Viewer</option>
                <option value="operator">Operator</option>
                <option value="admin">Admin</option>
              </select>
            ),
          },
          { header: 'Created', cell: (u) => <When iso={u.created_at} /> },
        ]}
        deleteName={(u) => `user ${u.name}`}
      />
    </>
  );
}
