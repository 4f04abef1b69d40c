import { useState, type FormEvent } from 'react';
import { api, type Ref } from '../api';
import {
  DeleteButton,
  EmptyState,
  ErrorMessage,
  Field,
  PageHeader,
  useAction,
  useList,
} from '../components';
import { PolicyEditor, type PolicyState } from '../policy-editor';
import type { ReservedAddr } from './addresses';
import { useBackends } from './backends';
import type { IpPolicy } from './ip-policies';

type EdgeType = 'tcp' | 'tls';

interface Edge {
  id: string;
  description: string;
  hostports: string[] | null;
  backend: { enabled: boolean; backend: Ref } | null;
  ip_restriction: { enabled: boolean; ip_policies: Ref[] } | null;
  traffic_policy: { enabled: boolean; value: string } | null;
  tls_termination?: { enabled: boolean; terminate_at: string; min_version: string | null } | null;
  mutual_tls?: { enabled: boolean; certificate_authorities: Ref[] } | null;
}

/** Save is only offered for a policy the engine accepted (or for none). */
function policyBlocksSave(state: PolicyState): string | undefined {
  if (state === 'invalid') return 'Fix the traffic policy first: the engine refuses it.';
  if (state === 'checking') return 'Checking the traffic policy…';
  return undefined;
}

function TrafficPolicyModule({
  type,
  edge,
  onSaved,
}: {
  type: EdgeType;
  edge: Edge;
  onSaved: () => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(edge.traffic_policy?.value ?? '');
  const [state, setState] = useState<PolicyState>('empty');
  const action = useAction();
  const save = async () => {
    const ok = await action.run(async () => {
      if (text.trim() === '') await api('DELETE', `/edges/${type}/${edge.id}/traffic_policy`);
      else await api('PUT', `/edges/${type}/${edge.id}/traffic_policy`, { value: text });
      await onSaved();
    });
    if (ok) setEditing(false);
  };
  const blocked = policyBlocksSave(state);
  return (
    <div className="module">
      <h3>Traffic policy</h3>
      {!editing ? (
        <>
          {edge.traffic_policy ? (
            <pre className="policy">{edge.traffic_policy.value}</pre>
          ) : (
            <p className="muted">None.</p>
          )}
          <button type="button" className="secondary" onClick={() => setEditing(true)}>
            {edge.traffic_policy ? 'Edit traffic policy' : 'Add traffic policy'}
          </button>
        </>
      ) : (
        <>
          <PolicyEditor protocol={type} value={text} onChange={setText} onState={setState} />
          <div className="actions">
            <button
              type="button"
              onClick={() => void save()}
              disabled={action.busy || blocked !== undefined}
            >
              Save traffic policy
            </button>
            <button type="button" className="secondary" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
          {blocked ? <p className="hint">{blocked}</p> : null}
          <ErrorMessage error={action.error} />
        </>
      )}
    </div>
  );
}

function EdgeCard({
  type,
  edge,
  reload,
}: {
  type: EdgeType;
  edge: Edge;
  reload: () => Promise<void>;
}) {
  const action = useAction();
  const title = edge.description || edge.id;
  return (
    <section className="card" aria-label={`${type.toUpperCase()} edge ${title}`}>
      <div className="card-head">
        <h2>
          {title} <span className="badge">{type.toUpperCase()}</span>
        </h2>
        <DeleteButton
          name={`edge ${title}`}
          onDelete={() =>
            action
              .run(async () => {
                await api('DELETE', `/edges/${type}/${edge.id}`);
                await reload();
              })
              .then(() => undefined)
          }
        />
      </div>
      <ErrorMessage error={action.error} />
      <p>
        {(edge.hostports ?? []).map((h) => (
          <code key={h} className="chip">
            {h}
          </code>
        ))}{' '}
        <code className="muted">{edge.id}</code>
      </p>
      <div className="modules">
        <div className="module">
          <h3>Backend</h3>
          {edge.backend ? (
            <code>{edge.backend.backend.id}</code>
          ) : (
            <p className="muted">None: connections are refused.</p>
          )}
        </div>
        <div className="module">
          <h3>IP restriction</h3>
          {edge.ip_restriction ? (
            edge.ip_restriction.ip_policies.map((p) => (
              <code key={p.id} className="chip">
                {p.id}
              </code>
            ))
          ) : (
            <p className="muted">None: every address may connect.</p>
          )}
        </div>
        {type === 'tls' ? (
          <>
            <div className="module">
              <h3>TLS termination</h3>
              {edge.tls_termination ? (
                <p>
                  At the {edge.tls_termination.terminate_at}
                  {edge.tls_termination.min_version
                    ? `, TLS ≥ ${edge.tls_termination.min_version}`
                    : ''}
                </p>
              ) : (
                <p className="muted">Passed through to the agent.</p>
              )}
            </div>
            <div className="module">
              <h3>Mutual TLS</h3>
              {edge.mutual_tls ? (
                edge.mutual_tls.certificate_authorities.map((c) => (
                  <code key={c.id} className="chip">
                    {c.id}
                  </code>
                ))
              ) : (
                <p className="muted">Off.</p>
              )}
            </div>
          </>
        ) : null}
        <TrafficPolicyModule type={type} edge={edge} onSaved={reload} />
      </div>
    </section>
  );
}

function CreateEdge({ onCreated }: { onCreated: () => Promise<void> }) {
  const addrs = useList<ReservedAddr>('/reserved_addrs', 'reserved_addrs');
  const policies = useList<IpPolicy>('/ip_policies', 'ip_policies');
  const { lists } = useBackends();
  const [type, setType] = useState<EdgeType>('tcp');
  const [description, setDescription] = useState('');
  const [hostports, setHostports] = useState<string[]>([]);
  const [tlsHostports, setTlsHostports] = useState('');
  const [backendId, setBackendId] = useState('');
  const [ipPolicyIds, setIpPolicyIds] = useState<string[]>([]);
  const [policy, setPolicy] = useState('');
  const [policyState, setPolicyState] = useState<PolicyState>('empty');
  const action = useAction();
  const toggle = (list: string[], v: string, on: boolean) =>
    on ? [...list, v] : list.filter((x) => x !== v);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(async () => {
      const ports =
        type === 'tcp' ? hostports : tlsHostports.split(/[\s,]+/).filter((h) => h !== '');
      await api('POST', `/edges/${type}`, {
        description,
        hostports: ports,
        ...(backendId ? { backend: { backend_id: backendId } } : {}),
        ...(ipPolicyIds.length ? { ip_restriction: { ip_policy_ids: ipPolicyIds } } : {}),
        ...(policy.trim() ? { traffic_policy: { value: policy } } : {}),
      });
      await onCreated();
    });
    if (ok) {
      setDescription('');
      setHostports([]);
      setTlsHostports('');
      setBackendId('');
      setIpPolicyIds([]);
      setPolicy('');
    }
  };
  const blocked = policyBlocksSave(policyState);
  return (
    <form className="card" onSubmit={(e) => void create(e)} aria-label="Create an edge">
      <h2>New edge</h2>
      <fieldset className="radio-row">
        <legend>Type</legend>
        {(['tcp', 'tls'] as const).map((t) => (
          <label key={t}>
            <input
              type="radio"
              name="edge-type"
              value={t}
              checked={type === t}
              onChange={() => setType(t)}
            />{' '}
            {t.toUpperCase()}
          </label>
        ))}
      </fieldset>
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
      {type === 'tcp' ? (
        <fieldset>
          <legend>Addresses</legend>
          {addrs.items?.length === 0 ? (
            <p className="hint">Reserve a TCP address first (TCP addresses page).</p>
          ) : null}
          {addrs.items?.map((a) => (
            <label key={a.id} className="check">
              <input
                type="checkbox"
                checked={hostports.includes(a.addr)}
                onChange={(e) => setHostports((l) => toggle(l, a.addr, e.target.checked))}
              />{' '}
              <code>{a.addr}</code> {a.description}
            </label>
          ))}
        </fieldset>
      ) : (
        <Field
          label="Host names with port"
          hint="Names of reserved domains, e.g. app.example.com:443"
        >
          {(p) => (
            <input {...p} value={tlsHostports} onChange={(e) => setTlsHostports(e.target.value)} />
          )}
        </Field>
      )}
      <Field label="Backend" hint="Where the edge sends connections (Backends page).">
        {(p) => (
          <select {...p} value={backendId} onChange={(e) => setBackendId(e.target.value)}>
            <option value="">None</option>
            {lists.flatMap(({ name, list }) =>
              (list.items ?? []).map((b) => (
                <option key={b.id} value={b.id}>
                  {name}:{' '}
                  {b.description ||
                    (b.labels
                      ? Object.entries(b.labels)
                          .map(([k, v]) => `${k}=${v}`)
                          .join(', ')
                      : b.id)}
                </option>
              )),
            )}
          </select>
        )}
      </Field>
      <fieldset>
        <legend>IP restriction</legend>
        {policies.items?.length === 0 ? (
          <p className="hint">No IP policies yet (IP policies page): every address may connect.</p>
        ) : null}
        {policies.items?.map((pol) => (
          <label key={pol.id} className="check">
            <input
              type="checkbox"
              checked={ipPolicyIds.includes(pol.id)}
              onChange={(e) => setIpPolicyIds((l) => toggle(l, pol.id, e.target.checked))}
            />{' '}
            {pol.description || pol.id}
          </label>
        ))}
      </fieldset>
      <PolicyEditor
        protocol={type}
        value={policy}
        onChange={setPolicy}
        onState={setPolicyState}
        label="Traffic policy (optional, JSON or YAML)"
      />
      <button type="submit" disabled={action.busy || blocked !== undefined}>
        Create edge
      </button>
      {blocked ? <p className="hint">{blocked}</p> : null}
      <ErrorMessage error={action.error} />
    </form>
  );
}

/** Edges: TCP and TLS edges with their modules. */
export function EdgesPage() {
  const tcp = useList<Edge>('/edges/tcp', 'tcp_edges');
  const tls = useList<Edge>('/edges/tls', 'tls_edges');
  const reload = async () => {
    await Promise.all([tcp.reload(), tls.reload()]);
  };
  const none = tcp.items?.length === 0 && tls.items?.length === 0;
  return (
    <>
      <PageHeader title="Edges">
        An edge publishes a reserved address (TCP) or name (TLS) and sends its traffic to a backend,
        through modules: IP restriction, traffic policy, TLS termination and mutual TLS.
      </PageHeader>
      <CreateEdge onCreated={reload} />
      <ErrorMessage error={tcp.error ?? tls.error} />
      {none ? (
        <EmptyState>
          No edges yet. Reserve a TCP address, create a backend, then create an edge above.
        </EmptyState>
      ) : null}
      {tcp.items?.map((e) => (
        <EdgeCard key={e.id} type="tcp" edge={e} reload={reload} />
      ))}
      {tls.items?.map((e) => (
        <EdgeCard key={e.id} type="tls" edge={e} reload={reload} />
      ))}
    </>
  );
}
