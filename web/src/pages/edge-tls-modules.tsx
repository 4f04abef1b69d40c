import { useState } from 'react';
import { api } from '../api';
import { Checkbox, EditActions, SelectField } from '../fields';
import { useAction } from '../hooks';
import type { CertificateAuthority } from './certificate-authorities';
import type { Edge } from './edge-card';
import { Module } from './edge-module';

/** Where a TLS edge terminates TLS, and the oldest version it accepts there. */
export function TlsTerminationModule({
  edge,
  onSaved,
}: {
  edge: Edge;
  onSaved: () => Promise<void>;
}) {
  const current = edge.tls_termination ?? null;
  const [editing, setEditing] = useState(false);
  const [at, setAt] = useState(current?.terminate_at ?? 'edge');
  const [min, setMin] = useState(current?.min_version ?? '');
  const action = useAction();
  const path = `/edges/tls/${edge.id}/tls_termination`;
  // Start from what is saved now, not from an edit cancelled earlier.
  const startEditing = () => {
    setAt(current?.terminate_at ?? 'edge');
    setMin(current?.min_version ?? '');
    setEditing(true);
  };
  const done = async () => {
    await onSaved();
    setEditing(false);
  };
  const save = async () => {
    // The API wants no minimum version when the agent's service terminates.
    const body = { terminate_at: at, min_version: at === 'edge' && min ? min : null };
    if (await action.run(() => api<undefined>('PUT', path, body))) await done();
  };
  const remove = async () => {
    if (await action.run(() => api<undefined>('DELETE', path))) await done();
  };
  if (!editing) {
    return (
      <Module title="TLS termination">
        {current ? (
          <p data-testid="tls-termination">
            At the {current.terminate_at}
            {current.min_version ? `, TLS ≥ ${current.min_version}` : ''}
          </p>
        ) : (
          <p className="muted">Passed through to the agent.</p>
        )}
        <button type="button" className="secondary" onClick={startEditing}>
          Edit TLS termination
        </button>
      </Module>
    );
  }
  return (
    <Module title="TLS termination">
      <SelectField label="Terminate at" value={at} onChange={setAt}>
        <option value="edge">The edge (Burrow serves the certificate)</option>
        <option value="upstream">Upstream (the agent&apos;s service)</option>
      </SelectField>
      {at === 'edge' ? (
        <SelectField label="Minimum TLS version" value={min} onChange={setMin}>
          <option value="">Default (1.2)</option>
          {['1.0', '1.1', '1.2', '1.3'].map((v) => (
            <option key={v} value={v}>
              TLS {v}
            </option>
          ))}
        </SelectField>
      ) : null}
      <EditActions
        save={{ text: 'Save TLS termination', run: save }}
        remove={current ? { text: 'Remove TLS termination', run: remove } : undefined}
        cancel={() => setEditing(false)}
        busy={action.busy}
        error={action.error}
      />
    </Module>
  );
}

/** The CAs whose client certificates a TLS edge lets in; needs TLS terminated at the edge. */
export function MutualTlsModule({
  edge,
  cas,
  onSaved,
}: {
  edge: Edge;
  cas: CertificateAuthority[] | undefined;
  onSaved: () => Promise<void>;
}) {
  const current = edge.mutual_tls ?? null;
  const [editing, setEditing] = useState(false);
  const [chosen, setChosen] = useState<string[]>(
    current?.certificate_authorities.map((c) => c.id) ?? [],
  );
  const action = useAction();
  const path = `/edges/tls/${edge.id}/mutual_tls`;
  const startEditing = () => {
    setChosen(current?.certificate_authorities.map((c) => c.id) ?? []);
    setEditing(true);
  };
  const name = (id: string) => {
    const ca = cas?.find((c) => c.id === id);
    return ca ? ca.description || ca.subject_common_name || id : id;
  };
  const done = async () => {
    await onSaved();
    setEditing(false);
  };
  const save = async () => {
    const body = { certificate_authority_ids: chosen };
    if (await action.run(() => api<undefined>('PUT', path, body))) await done();
  };
  const remove = async () => {
    if (await action.run(() => api<undefined>('DELETE', path))) await done();
  };
  if (!editing) {
    return (
      <Module title="Mutual TLS">
        {current ? (
          <ul className="plain" data-testid="mutual-tls">
            {current.certificate_authorities.map((c) => (
              <li key={c.id}>{name(c.id)}</li>
            ))}
          </ul>
        ) : (
          <p className="muted">Off: clients need no certificate.</p>
        )}
        <button type="button" className="secondary" onClick={startEditing}>
          Edit mutual TLS
        </button>
      </Module>
    );
  }
  return (
    <Module title="Mutual TLS">
      <fieldset>
        <legend>Certificate authorities</legend>
        {cas?.length === 0 ? (
          <p className="hint">Upload a certificate authority first (below).</p>
        ) : null}
        {cas?.map((ca) => (
          <Checkbox
            key={ca.id}
            checked={chosen.includes(ca.id)}
            onChange={(on) =>
              setChosen(on ? [...chosen, ca.id] : chosen.filter((x) => x !== ca.id))
            }
          >
            {' '}
            {name(ca.id)}
          </Checkbox>
        ))}
      </fieldset>
      <p className="hint">Mutual TLS needs TLS terminated at the edge.</p>
      <EditActions
        save={{ text: 'Save mutual TLS', run: save }}
        remove={current ? { text: 'Turn off mutual TLS', run: remove } : undefined}
        cancel={() => setEditing(false)}
        busy={action.busy}
        error={action.error}
      />
    </Module>
  );
}
