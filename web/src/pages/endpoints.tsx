import { useState } from 'react';
import { PageHeader } from '../components';
import { CreateForm, TextField } from '../fields';
import { useResource, type Resource } from '../hooks';
import { PolicyEditor, policyBlocksSave, type PolicyState } from '../policy-editor';
import { ResourceTable, type Column } from '../resource';

interface Endpoint {
  id: string;
  type: 'ephemeral' | 'cloud';
  url: string;
  proto: string;
  description: string;
  bindings: string[];
  traffic_policy: string;
  upstream_url: string;
}

/** The engine checks a policy for the protocol the URL's scheme names. */
function protocolOf(url: string): 'http' | 'https' | 'tcp' | 'tls' {
  const scheme = /^([a-z]+):\/\//i.exec(url.trim())?.[1]?.toLowerCase();
  return scheme === 'http' || scheme === 'tcp' || scheme === 'tls' ? scheme : 'https';
}

function CreateCloudEndpoint({ endpoints }: { endpoints: Resource<Endpoint> }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [policy, setPolicy] = useState('');
  const [state, setState] = useState<PolicyState>('empty');
  const submit = async () => {
    const body = { type: 'cloud', url: url.trim(), description, traffic_policy: policy };
    if (!(await endpoints.create(body))) return;
    setUrl('');
    setDescription('');
    setPolicy('');
  };
  return (
    <CreateForm
      className="card"
      title="New cloud endpoint"
      label="Create a cloud endpoint"
      submit="Create cloud endpoint"
      action={endpoints.action}
      onSubmit={submit}
      blocked={policyBlocksSave(state)}
    >
      <TextField
        label="URL"
        hint="https://app.example.com (a reserved domain), tcp://host:port (a reserved address), or https://api.internal"
        value={url}
        onChange={setUrl}
        required
      />
      <TextField
        label="Description"
        value={description}
        onChange={setDescription}
        maxLength={255}
      />
      <PolicyEditor
        protocol={protocolOf(url)}
        value={policy}
        onChange={setPolicy}
        onState={setState}
        label="Traffic policy (JSON or YAML): what the endpoint does with no agent"
      />
    </CreateForm>
  );
}

const columns: Array<Column<Endpoint>> = [
  {
    header: 'URL',
    cell: (e) => (
      <>
        <code>{e.url}</code>
        {e.bindings.includes('internal') ? <span className="badge">internal</span> : null}
      </>
    ),
  },
  {
    header: 'Type',
    cell: (e) => (
      <>
        <span className="badge">{e.type}</span>
        {e.type === 'cloud' ? null : <span className="muted"> agent</span>}
      </>
    ),
  },
  {
    header: 'Description',
    cell: (e) => e.description || (e.upstream_url ? `→ ${e.upstream_url}` : ''),
  },
  {
    header: 'Traffic policy',
    cell: (e) =>
      e.traffic_policy ? (
        <details>
          <summary>Show</summary>
          <pre className="policy">{e.traffic_policy}</pre>
        </details>
      ) : (
        <span className="muted">None</span>
      ),
  },
];

/**
 * Endpoints: the URLs the edge serves. Agent endpoints come and go with their agents; cloud
 * endpoints are stored and answered by their traffic policy with no agent online.
 */
export function EndpointsPage() {
  // Polled: agent endpoints appear and vanish as agents connect and leave.
  const endpoints = useResource<Endpoint>('/endpoints', 'endpoints', { pollMs: 5000 });
  return (
    <>
      <PageHeader title="Endpoints">
        Every URL the edge serves. <strong>Agent</strong> endpoints exist while their agent is
        connected; <strong>cloud</strong> endpoints are created here and answered by their traffic
        policy (a response, a redirect, or <code>forward-internal</code> to an internal endpoint),
        with no agent online.
      </PageHeader>
      {/* A refused delete shows its message in the form, where the page's errors go. */}
      <CreateCloudEndpoint endpoints={endpoints} />
      <ResourceTable
        resource={endpoints}
        caption="Endpoints"
        empty="No endpoints yet. Connect an agent, or create a cloud endpoint above."
        columns={columns}
        // Agent endpoints go when their agent does; only cloud endpoints are deleted here.
        deleteName={(e) => (e.type === 'cloud' ? `endpoint ${e.url}` : undefined)}
      />
    </>
  );
}
