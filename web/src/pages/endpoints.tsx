import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { api } from '../api';
import { TrafficCharts } from '../charts';
import { ErrorMessage, PageHeader } from '../components';
import { Checkbox, CreateForm, EditActions, TextField } from '../fields';
import { useAction, useLoad, useResource, type Resource } from '../hooks';
import { PolicyEditor, policyBlocksSave, type PolicyState } from '../policy-editor';
import { ResourceTable, type Column } from '../resource';
import { useRoute } from '../routes';

interface Endpoint {
  id: string;
  type: 'ephemeral' | 'cloud';
  url: string;
  proto: string;
  description: string;
  metadata: string;
  bindings: string[];
  pooling_enabled: boolean;
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

/**
 * The form that edits a cloud endpoint (`PATCH /endpoints/{id}`): its URL, description, metadata,
 * pooling and traffic policy. The binding follows from the URL (a `.internal` name is internal).
 * A refusal shows the API's message, which names the field, and keeps the form as it was.
 */
function EditCloudEndpoint({
  endpoint,
  onSaved,
  onClose,
}: {
  endpoint: Endpoint;
  onSaved: () => Promise<void>;
  onClose: () => void;
}) {
  const [url, setUrl] = useState(endpoint.url);
  const [description, setDescription] = useState(endpoint.description);
  const [metadata, setMetadata] = useState(endpoint.metadata);
  const [pooling, setPooling] = useState(endpoint.pooling_enabled);
  const [policy, setPolicy] = useState(endpoint.traffic_policy);
  const [state, setState] = useState<PolicyState>('empty');
  const action = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  // Take the reader to the form the row's Edit button opened.
  useEffect(() => {
    heading.current?.scrollIntoView({ block: 'nearest' });
    heading.current?.focus();
  }, []);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    const body = {
      description,
      metadata,
      pooling_enabled: pooling,
      traffic_policy: policy,
      // The URL is sent only when it changes: the API then checks it, and its binding, again.
      ...(url.trim() === endpoint.url ? {} : { url: url.trim() }),
    };
    if (await action.send('PATCH', `/endpoints/${endpoint.id}`, body, onSaved)) onClose();
  };
  return (
    <form className="card" aria-label={`Edit endpoint ${endpoint.url}`} onSubmit={save}>
      <h2 tabIndex={-1} ref={heading}>
        Edit <code>{endpoint.url}</code>
      </h2>
      <TextField
        label="URL"
        hint="A .internal name makes the endpoint internal; any other name is public."
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
      <TextField
        label="Metadata"
        hint="Any machine-readable text, up to 4096 bytes."
        value={metadata}
        onChange={setMetadata}
      />
      <Checkbox checked={pooling} onChange={setPooling}>
        {' '}
        Pooling: share the URL with agent endpoints that bind it with pooling enabled
      </Checkbox>
      <PolicyEditor
        protocol={protocolOf(url)}
        value={policy}
        onChange={setPolicy}
        onState={setState}
        label="Traffic policy (JSON or YAML)"
      />
      <EditActions
        save={{ text: 'Save endpoint' }}
        cancel={onClose}
        busy={action.busy}
        error={action.error}
        blocked={policyBlocksSave(state)}
      />
    </form>
  );
}

const columns: Array<Column<Endpoint>> = [
  {
    header: 'URL',
    cell: (e) => (
      <>
        <a href={`#/endpoints/${e.id}`} title="Charts and details">
          <code>{e.url}</code>
        </a>
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
 * One endpoint's page (`#/endpoints/<id>`): what it is, and charts of its traffic on this node.
 * An agent endpoint that went offline is gone from the API, but its charts stay (by URL) for a day.
 */
function EndpointPage({ id }: { id: string }) {
  const load = useCallback(
    () => api<Endpoint>('GET', `/endpoints/${encodeURIComponent(id)}`),
    [id],
  );
  const { data: endpoint, error } = useLoad(load);
  return (
    <>
      <PageHeader title={endpoint ? `Endpoint ${endpoint.url}` : 'Endpoint'}>
        <a href="#/endpoints">All endpoints</a>
      </PageHeader>
      <ErrorMessage error={error} />
      {endpoint ? (
        <>
          <section className="card">
            <dl className="facts">
              <dt>URL</dt>
              <dd>
                <code>{endpoint.url}</code>
              </dd>
              <dt>Type</dt>
              <dd>{endpoint.type === 'cloud' ? 'cloud' : 'agent'}</dd>
              {endpoint.description ? (
                <>
                  <dt>Description</dt>
                  <dd>{endpoint.description}</dd>
                </>
              ) : null}
            </dl>
          </section>
          <TrafficCharts endpoint={endpoint.url} />
        </>
      ) : null}
    </>
  );
}

/**
 * Endpoints: the URLs the edge serves. Agent endpoints come and go with their agents; cloud
 * endpoints are stored and answered by their traffic policy with no agent online. Each URL opens
 * the endpoint's page, with its charts.
 */
export function EndpointsPage() {
  const route = useRoute();
  return route[1] ? <EndpointPage key={route[1]} id={route[1]} /> : <EndpointList />;
}

function EndpointList() {
  // Polled: agent endpoints appear and vanish as agents connect and leave.
  const endpoints = useResource<Endpoint>('/endpoints', 'endpoints', { pollMs: 5000 });
  const [editing, setEditing] = useState<string | undefined>(undefined);
  // Gone when deleted (here or elsewhere): the form goes with it.
  const edited = endpoints.items?.find((e) => e.id === editing && e.type === 'cloud');
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
      {edited ? (
        <EditCloudEndpoint
          key={edited.id}
          endpoint={edited}
          onSaved={endpoints.reload}
          onClose={() => setEditing(undefined)}
        />
      ) : null}
      <ResourceTable
        resource={endpoints}
        caption="Endpoints"
        empty="No endpoints yet. Connect an agent, or create a cloud endpoint above."
        columns={columns}
        // Agent endpoints go when their agent does; only cloud endpoints are deleted here.
        deleteName={(e) => (e.type === 'cloud' ? `endpoint ${e.url}` : undefined)}
        // Agent endpoints are their agents' to change; cloud endpoints are edited here.
        actions={(e) =>
          e.type === 'cloud' ? (
            <button
              type="button"
              className="secondary"
              onClick={() => setEditing(e.id)}
              aria-label={`Edit endpoint ${e.url}`}
              aria-expanded={editing === e.id}
            >
              Edit
            </button>
          ) : null
        }
      />
    </>
  );
}
