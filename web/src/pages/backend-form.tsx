import { useState } from 'react';
import { labelPairs } from '../components';
import { Checkbox, CreateForm, TextField } from '../fields';
import { useAction } from '../hooks';
import type { Backend, BackendKind } from './backends';

/** What the form offers as members of a failover or weighted backend. */
export interface Member {
  id: string;
  /** e.g. `Tunnel group: app=ssh` */
  name: string;
}

/** How a backend reads in a list of members: its kind's name and description or labels. */
export function memberName(kindName: string, b: Backend): string {
  return `${kindName}: ${b.description || (b.labels ? labelPairs(b.labels).join(', ') : b.address || b.id)}`;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const part of text.split(/[\n,]/)) {
    const t = part.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    labels[eq < 0 ? t : t.slice(0, eq).trim()] = eq < 0 ? '' : t.slice(eq + 1).trim();
  }
  return labels;
}

const FORMS: Record<BackendKind, { label: string; submit: string }> = {
  tunnel_group: { label: 'Create a tunnel group backend', submit: 'Create tunnel group' },
  failover: { label: 'Create a failover backend', submit: 'Create failover backend' },
  weighted: { label: 'Create a weighted backend', submit: 'Create weighted backend' },
  static: { label: 'Create a static backend', submit: 'Create static backend' },
};

/**
 * The form that creates a backend of any kind: labels for a tunnel group, an ordered choice of
 * other backends for failover, a weight per backend for weighted, host:port for static.
 */
export function CreateBackend({
  members,
  onCreated,
}: {
  members: Member[];
  onCreated: () => Promise<void>;
}) {
  const [kind, setKind] = useState<BackendKind>('tunnel_group');
  const [description, setDescription] = useState('');
  const [labels, setLabels] = useState('');
  const [order, setOrder] = useState<string[]>([]);
  const [weights, setWeights] = useState<Record<string, string>>({});
  const [address, setAddress] = useState('');
  const [tls, setTls] = useState(false);
  const action = useAction();
  const fields = (): object => {
    switch (kind) {
      case 'tunnel_group':
        return { labels: parseLabels(labels) };
      case 'failover':
        return { backends: order };
      case 'weighted':
        return {
          backends: Object.fromEntries(
            Object.entries(weights)
              .filter(([, w]) => w.trim() !== '')
              .map(([id, w]) => [id, Number(w)]),
          ),
        };
      case 'static':
        return { address: address.trim(), tls: { enabled: tls } };
    }
  };
  const create = async () => {
    const body = { description, ...fields() };
    if (!(await action.send('POST', `/backends/${kind}`, body, onCreated))) return;
    setDescription('');
    setLabels('');
    setOrder([]);
    setWeights({});
    setAddress('');
    setTls(false);
  };
  const needsMembers = (kind === 'failover' || kind === 'weighted') && members.length === 0;
  return (
    <CreateForm
      label={FORMS[kind].label}
      submit={FORMS[kind].submit}
      action={action}
      onSubmit={create}
      blocked={needsMembers ? 'Create a tunnel group or static backend first.' : undefined}
    >
      <fieldset className="radio-row">
        <legend>Kind</legend>
        {(
          [
            ['tunnel_group', 'Tunnel group'],
            ['failover', 'Failover'],
            ['weighted', 'Weighted'],
            ['static', 'Static address'],
          ] as const
        ).map(([k, name]) => (
          <label key={k}>
            <input
              type="radio"
              name="backend-kind"
              value={k}
              checked={kind === k}
              onChange={() => setKind(k)}
            />{' '}
            {name}
          </label>
        ))}
      </fieldset>
      {kind === 'tunnel_group' ? (
        <TextField
          label="Labels"
          hint="key=value pairs, separated by commas, e.g. app=ssh"
          value={labels}
          onChange={setLabels}
          required
        />
      ) : null}
      {kind === 'failover' ? (
        <fieldset>
          <legend>Backends, tried in the order you tick them</legend>
          {members.map((m) => {
            const at = order.indexOf(m.id);
            return (
              <Checkbox
                key={m.id}
                checked={at >= 0}
                onChange={(on) => setOrder(on ? [...order, m.id] : order.filter((x) => x !== m.id))}
              >
                {' '}
                {m.name}
                {at >= 0 ? <span className="badge">{at + 1}</span> : null}
              </Checkbox>
            );
          })}
        </fieldset>
      ) : null}
      {kind === 'weighted' ? (
        <fieldset>
          <legend>Weights (0–10000; leave empty to leave a backend out)</legend>
          {members.map((m) => (
            <TextField
              key={m.id}
              label={`Weight of ${m.name}`}
              type="number"
              min={0}
              max={10000}
              value={weights[m.id] ?? ''}
              onChange={(w) => setWeights({ ...weights, [m.id]: w })}
            />
          ))}
        </fieldset>
      ) : null}
      {kind === 'static' ? (
        <>
          <TextField
            label="Address"
            hint="host:port, e.g. web.internal:8443"
            value={address}
            onChange={setAddress}
            required
          />
          <Checkbox checked={tls} onChange={setTls}>
            {' '}
            Connect with TLS
          </Checkbox>
        </>
      ) : null}
      <TextField
        label="Description"
        value={description}
        onChange={setDescription}
        maxLength={255}
      />
    </CreateForm>
  );
}
