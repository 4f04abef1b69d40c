import { useState } from 'react';
import { When } from '../components';
import { CreateForm, Field, TextField } from '../fields';
import type { Resource } from '../hooks';
import { ResourceTable } from '../resource';

export interface CertificateAuthority {
  id: string;
  description: string;
  subject_common_name: string;
  not_after: string;
}

/**
 * The CAs that sign client certificates, which a TLS edge's mutual TLS picks from: upload (the
 * certificate only: its key stays with its owner), list, delete. Lives on the Edges page because
 * mutual TLS is the only thing that uses them.
 */
export function CertificateAuthorities({ cas }: { cas: Resource<CertificateAuthority> }) {
  const [description, setDescription] = useState('');
  const [pem, setPem] = useState('');
  const upload = async () => {
    if (!(await cas.create({ description, ca_pem: pem }))) return;
    setDescription('');
    setPem('');
  };
  return (
    <section className="card" aria-label="Certificate authorities">
      <h2>Certificate authorities for mutual TLS</h2>
      <p className="hint">
        Upload the certificate of the CA that signs your clients&apos; certificates; then pick it in
        a TLS edge&apos;s mutual TLS module. Only the certificate: never its private key.
      </p>
      <CreateForm
        className="inline-form"
        label="Upload a certificate authority"
        submit="Upload certificate authority"
        action={cas.action}
        onSubmit={upload}
      >
        <TextField
          label="CA name"
          hint="Optional, e.g. Acme client CA"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
        <Field label="CA certificate (PEM)" hint="One -----BEGIN CERTIFICATE----- block.">
          {(p) => (
            <textarea
              {...p}
              rows={4}
              value={pem}
              onChange={(e) => setPem(e.target.value)}
              required
              spellCheck={false}
            />
          )}
        </Field>
      </CreateForm>
      <ResourceTable
        resource={cas}
        caption="Certificate authorities"
        empty="No certificate authorities yet: mutual TLS needs one."
        columns={[
          { header: 'Description', cell: (c) => c.description },
          { header: 'Subject', cell: (c) => c.subject_common_name },
          { header: 'Valid until', cell: (c) => <When iso={c.not_after} /> },
          { header: 'ID', cell: (c) => <code>{c.id}</code> },
        ]}
        deleteName={(c) => `certificate authority ${c.description || c.subject_common_name}`}
      />
    </section>
  );
}
