import { useState } from 'react';
import { When } from '../components';
import { CreateForm, Field, TextField } from '../fields';
import type { Resource } from '../hooks';
import { ResourceTable } from '../resource';

export interface TlsCertificate {
  id: string;
  description: string;
  subject_common_name: string;
  subject_alternative_names: { dns_names: string[]; ips: string[] };
  not_after: string;
  managed: boolean;
}

/** A PEM text area: monospace, no spell checking. */
function PemField({
  label,
  hint,
  value,
  onChange,
}: {
  label: string;
  hint: string;
  value: string;
  onChange: (value: string) => void;
}) {
  return (
    <Field label={label} hint={hint}>
      {(p) => (
        <textarea
          {...p}
          rows={4}
          value={value}
          onChange={(e) => onChange(e.target.value)}
          required
          spellCheck={false}
          autoComplete="off"
        />
      )}
    </Field>
  );
}

/**
 * TLS certificates: upload one (chain and key) to serve for a reserved domain instead of a managed
 * one; list them (issued ones too) and delete. The key goes in once: the API never returns it, and
 * the form forgets it as soon as the upload succeeds.
 */
export function TlsCertificates({ certs }: { certs: Resource<TlsCertificate> }) {
  const [description, setDescription] = useState('');
  const [chain, setChain] = useState('');
  const [key, setKey] = useState('');
  const upload = async () => {
    const body = { description, certificate_pem: chain, private_key_pem: key };
    if (!(await certs.create(body))) return;
    setDescription('');
    setChain('');
    setKey('');
  };
  return (
    <section className="card" aria-label="TLS certificates">
      <h2>TLS certificates</h2>
      <p className="hint">
        Bring your own certificate for a reserved domain, then pick it on a domain above. Burrow
        never shows the private key again.
      </p>
      <CreateForm
        className="inline-form"
        label="Upload a TLS certificate"
        submit="Upload certificate"
        action={certs.action}
        onSubmit={upload}
      >
        <TextField
          label="Certificate name"
          hint="Optional, e.g. bought from Acme"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
        <PemField
          label="Certificate chain (PEM)"
          hint="The leaf first, then any intermediates."
          value={chain}
          onChange={setChain}
        />
        <PemField
          label="Private key (PEM)"
          hint="The leaf's unencrypted key; it is never shown back."
          value={key}
          onChange={setKey}
        />
      </CreateForm>
      <ResourceTable
        resource={certs}
        caption="TLS certificates"
        empty="No TLS certificates yet."
        columns={[
          { header: 'Name', cell: (c) => c.description || c.subject_common_name },
          { header: 'Covers', cell: (c) => c.subject_alternative_names.dns_names.join(', ') },
          { header: 'Kind', cell: (c) => (c.managed ? 'Issued by Burrow' : 'Uploaded') },
          { header: 'Valid until', cell: (c) => <When iso={c.not_after} /> },
          { header: 'ID', cell: (c) => <code>{c.id}</code> },
        ]}
        deleteName={(c) => `certificate ${c.description || c.id}`}
      />
    </section>
  );
}
