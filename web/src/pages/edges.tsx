import { useState, type ReactNode } from 'react';
import { EmptyState, ErrorMessage, labelPairs, PageHeader } from '../components';
import { Checkbox, CreateForm, SelectField, TextField } from '../fields';
import { useAction, useList, useResource } from '../hooks';
import { PolicyEditor, policyBlocksSave, type PolicyState } from '../policy-editor';
import type { ReservedAddr } from './addresses';
import { useBackends } from './backends';
import { CertificateAuthorities, type CertificateAuthority } from './certificate-authorities';
import { EdgeCard, type Edge, type EdgeType } from './edge-card';
import type { IpPolicy } from './ip-policies';

/**
 * A fieldset of checkboxes choosing some of `items` by their `value`; `none` says what it means
 * that there are none to choose from yet.
 */
function CheckList<T extends { id: string }>({
  legend,
  items,
  none,
  value,
  chosen,
  onChange,
  children,
}: {
  legend: string;
  items: T[] | undefined;
  none: string;
  value: (item: T) => string;
  chosen: string[];
  onChange: (chosen: string[]) => void;
  children: (item: T) => ReactNode;
}) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      {items?.length === 0 ? <p className="hint">{none}</p> : null}
      {items?.map((item) => {
        const v = value(item);
        return (
          <Checkbox
            key={item.id}
            checked={chosen.includes(v)}
            onChange={(on) => onChange(on ? [...chosen, v] : chosen.filter((x) => x !== v))}
          >
            {' '}
            {children(item)}
          </Checkbox>
        );
      })}
    </fieldset>
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
  const create = async () => {
    const ports = type === 'tcp' ? hostports : tlsHostports.split(/[\s,]+/).filter((h) => h !== '');
    const body = {
      description,
      hostports: ports,
      ...(backendId ? { backend: { backend_id: backendId } } : {}),
      ...(ipPolicyIds.length ? { ip_restriction: { ip_policy_ids: ipPolicyIds } } : {}),
      ...(policy.trim() ? { traffic_policy: { value: policy } } : {}),
    };
    if (!(await action.send('POST', `/edges/${type}`, body, onCreated))) return;
    setDescription('');
    setHostports([]);
    setTlsHostports('');
    setBackendId('');
    setIpPolicyIds([]);
    setPolicy('');
  };
  return (
    <CreateForm
      className="card"
      title="New edge"
      label="Create an edge"
      submit="Create edge"
      action={action}
      onSubmit={create}
      blocked={policyBlocksSave(policyState)}
    >
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
      <TextField
        label="Description"
        value={description}
        onChange={setDescription}
        maxLength={255}
      />
      {type === 'tcp' ? (
        <CheckList
          legend="Addresses"
          items={addrs.items}
          none="Reserve a TCP address first (TCP addresses page)."
          value={(a) => a.addr}
          chosen={hostports}
          onChange={setHostports}
        >
          {(a) => (
            <>
              <code>{a.addr}</code> {a.description}
            </>
          )}
        </CheckList>
      ) : (
        <TextField
          label="Host names with port"
          hint="Names of reserved domains, e.g. app.example.com:443"
          value={tlsHostports}
          onChange={setTlsHostports}
        />
      )}
      <SelectField
        label="Backend"
        hint="Where the edge sends connections (Backends page)."
        value={backendId}
        onChange={setBackendId}
      >
        <option value="">None</option>
        {lists.flatMap(({ name, list }) =>
          (list.items ?? []).map((b) => (
            <option key={b.id} value={b.id}>
              {name}: {b.description || (b.labels ? labelPairs(b.labels).join(', ') : b.id)}
            </option>
          )),
        )}
      </SelectField>
      <CheckList
        legend="IP restriction"
        items={policies.items}
        none="No IP policies yet (IP policies page): every address may connect."
        value={(pol) => pol.id}
        chosen={ipPolicyIds}
        onChange={setIpPolicyIds}
      >
        {(pol) => pol.description || pol.id}
      </CheckList>
      <PolicyEditor
        protocol={type}
        value={policy}
        onChange={setPolicy}
        onState={setPolicyState}
        label="Traffic policy (optional, JSON or YAML)"
      />
    </CreateForm>
  );
}

/** Edges: TCP and TLS edges with their modules. */
export function EdgesPage() {
  const tcp = useList<Edge>('/edges/tcp', 'tcp_edges');
  const tls = useList<Edge>('/edges/tls', 'tls_edges');
  const cas = useResource<CertificateAuthority>(
    '/certificate_authorities',
    'certificate_authorities',
  );
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
        <EdgeCard key={e.id} type="tls" edge={e} reload={reload} cas={cas.items} />
      ))}
      <CertificateAuthorities cas={cas} />
    </>
  );
}
