import { useState } from 'react';
import { PageHeader, ShownOnce, When } from '../components';
import { CreateForm, SelectField, TextField } from '../fields';
import { useOwnerName, useResource } from '../hooks';
import { ResourceTable } from '../resource';

interface ApiKey {
  id: string;
  description: string;
  owner_id: string;
  role: string | null;
  scopes: string[] | null;
  created_at: string;
  token: string | null;
}

/** "endpoints:write, reserved_domains:read" as the API's list; empty: no scopes (null). */
function scopeList(text: string): string[] | null {
  const scopes = text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return scopes.length === 0 ? null : scopes;
}

/** API keys: create (the key shown once), list, delete. */
export function ApiKeysPage() {
  const keys = useResource<ApiKey>('/api_keys', 'keys');
  const ownerName = useOwnerName();
  const [description, setDescription] = useState('');
  const [role, setRole] = useState('');
  const [scopes, setScopes] = useState('');
  const [created, setCreated] = useState<ApiKey | undefined>(undefined);
  const create = async () => {
    const key = await keys.create({
      description,
      ...(role === '' ? {} : { role }),
      ...(scopeList(scopes) ? { scopes: scopeList(scopes) } : {}),
    });
    if (!key) return;
    setCreated(key);
    setDescription('');
    setScopes('');
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
      <CreateForm
        label="Create an API key"
        submit="Create API key"
        action={keys.action}
        onSubmit={create}
      >
        <TextField
          label="Description"
          hint="What uses this key, e.g. “CI deploys”."
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
        <SelectField
          label="Role"
          hint="A key can do what your role allows, or less."
          value={role}
          onChange={setRole}
        >
          <option value="">Mine</option>
          <option value="operator">Operator</option>
          <option value="viewer">Viewer (read only)</option>
        </SelectField>
        <TextField
          label="Scopes"
          hint="Optional: limit the key to these, e.g. “endpoints:write, reserved_domains:read”."
          value={scopes}
          onChange={setScopes}
          maxLength={2000}
        />
      </CreateForm>
      <ResourceTable
        resource={keys}
        caption="API keys"
        empty="No API keys yet. Create one above to use the API or the CLI."
        columns={[
          {
            header: 'Description',
            cell: (k) => k.description || <span className="muted">(none)</span>,
          },
          { header: 'ID', cell: (k) => <code>{k.id}</code> },
          {
            header: 'Owner',
            cell: (k) => <span title={k.owner_id}>{ownerName(k.owner_id)}</span>,
          },
          {
            header: 'Allows',
            cell: (k) => (
              <>
                {k.role ?? <span className="muted">owner&apos;s role</span>}
                {k.scopes ? <span className="muted"> · {k.scopes.join(', ')}</span> : null}
              </>
            ),
          },
          { header: 'Created', cell: (k) => <When iso={k.created_at} /> },
        ]}
        deleteName={(k) => `API key ${k.description || k.id}`}
      />
    </>
  );
}
