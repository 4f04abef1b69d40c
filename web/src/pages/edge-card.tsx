import { useState } from 'react';
import { api, type Ref } from '../api';
import { Chips, DeleteButton, ErrorMessage } from '../components';
import { EditActions } from '../fields';
import { useAction } from '../hooks';
import { PolicyEditor, policyBlocksSave, type PolicyState } from '../policy-editor';
import { ResourceCard } from '../resource';
import { Module } from './edge-module';
import type { CertificateAuthority } from './certificate-authorities';
import { MutualTlsModule, TlsTerminationModule } from './edge-tls-modules';

export type EdgeType = 'tcp' | 'tls';

export interface Edge {
  id: string;
  description: string;
  hostports: string[] | null;
  backend: { enabled: boolean; backend: Ref } | null;
  ip_restriction: { enabled: boolean; ip_policies: Ref[] } | null;
  traffic_policy: { enabled: boolean; value: string } | null;
  tls_termination?: { enabled: boolean; terminate_at: string; min_version: string | null } | null;
  mutual_tls?: { enabled: boolean; certificate_authorities: Ref[] } | null;
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
      // An empty document removes the policy.
      if (text.trim() === '') await api('DELETE', `/edges/${type}/${edge.id}/traffic_policy`);
      else await api('PUT', `/edges/${type}/${edge.id}/traffic_policy`, { value: text });
      await onSaved();
    });
    if (ok) setEditing(false);
  };
  if (!editing) {
    return (
      <Module title="Traffic policy">
        {edge.traffic_policy ? (
          <pre className="policy">{edge.traffic_policy.value}</pre>
        ) : (
          <p className="muted">None.</p>
        )}
        <button type="button" className="secondary" onClick={() => setEditing(true)}>
          {edge.traffic_policy ? 'Edit traffic policy' : 'Add traffic policy'}
        </button>
      </Module>
    );
  }
  return (
    <Module title="Traffic policy">
      <PolicyEditor protocol={type} value={text} onChange={setText} onState={setState} />
      <EditActions
        save={{ text: 'Save traffic policy', run: save }}
        cancel={() => setEditing(false)}
        busy={action.busy}
        error={action.error}
        blocked={policyBlocksSave(state)}
      />
    </Module>
  );
}

/** One TCP or TLS edge as a card: its addresses, its modules, and delete. */
export function EdgeCard({
  type,
  edge,
  reload,
  cas,
}: {
  type: EdgeType;
  edge: Edge;
  reload: () => Promise<void>;
  /** The certificate authorities mutual TLS may pick (TLS edges only). */
  cas?: CertificateAuthority[];
}) {
  const action = useAction();
  const title = edge.description || edge.id;
  const TYPE = type.toUpperCase();
  return (
    <ResourceCard
      label={`${TYPE} edge ${title}`}
      title={
        <>
          {title} <span className="badge">{TYPE}</span>
        </>
      }
      actions={
        <DeleteButton
          name={`edge ${title}`}
          onDelete={() => action.send('DELETE', `/edges/${type}/${edge.id}`, undefined, reload)}
        />
      }
    >
      <ErrorMessage error={action.error} />
      <p>
        <Chips values={edge.hostports ?? []} /> <code className="muted">{edge.id}</code>
      </p>
      <div className="modules">
        <Module title="Backend">
          {edge.backend ? (
            <code>{edge.backend.backend.id}</code>
          ) : (
            <p className="muted">None: connections are refused.</p>
          )}
        </Module>
        <Module title="IP restriction">
          {edge.ip_restriction ? (
            <Chips values={edge.ip_restriction.ip_policies.map((p) => p.id)} />
          ) : (
            <p className="muted">None: every address may connect.</p>
          )}
        </Module>
        {type === 'tls' ? (
          <>
            <TlsTerminationModule edge={edge} onSaved={reload} />
            <MutualTlsModule edge={edge} cas={cas} onSaved={reload} />
          </>
        ) : null}
        <TrafficPolicyModule type={type} edge={edge} onSaved={reload} />
      </div>
    </ResourceCard>
  );
}
