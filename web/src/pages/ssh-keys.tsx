import { useState } from 'react';
import { Chips, PageHeader, When } from '../components';
import { CreateForm, TextField } from '../fields';
import { useOwnerName, useResource } from '../hooks';
import { ResourceTable } from '../resource';
import { OwnerField } from './bot-users';

interface SshCredential {
  id: string;
  description: string;
  owner_id: string;
  acl: string[];
  public_key: string;
  fingerprint: string;
  created_at: string;
}

/**
 * SSH keys (`/ssh_credentials`): public keys that open tunnels with the OpenSSH client alone
 * (`ssh -R 0:localhost:3000 … http`, docs/ssh.md), with the owners and ACL rules of authtokens.
 */
export function SshKeysPage() {
  const keys = useResource<SshCredential>('/ssh_credentials', 'ssh_credentials');
  const [publicKey, setPublicKey] = useState('');
  const [description, setDescription] = useState('');
  const [owner, setOwner] = useState('');
  const [acl, setAcl] = useState('');

  const create = async () => {
    const rules = acl
      .split(',')
      .map((r) => r.trim())
      .filter((r) => r !== '');
    const made = await keys.create({
      public_key: publicKey,
      description,
      acl: rules,
      ...(owner ? { owner_id: owner } : {}),
    });
    if (!made) return;
    setPublicKey('');
    setDescription('');
    setAcl('');
  };
  const ownerName = useOwnerName();

  return (
    <>
      <PageHeader title="SSH keys">
        With a registered key,{' '}
        <code>ssh -R 0:localhost:3000 -p &lt;ssh port&gt; &lt;server&gt; http</code> puts a service
        online with nothing but the OpenSSH client. Deleting a key closes its live sessions.
      </PageHeader>
      <CreateForm
        className="card"
        title="New SSH key"
        label="Register an SSH key"
        submit="Register key"
        action={keys.action}
        onSubmit={create}
      >
        <TextField
          label="Public key"
          hint="The contents of the .pub file: ed25519, ECDSA, or RSA of at least 2048 bits."
          value={publicKey}
          placeholder="ssh-ed25519 AAAA… me@laptop"
          onChange={setPublicKey}
          required
        />
        <TextField
          label="Description"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
        <OwnerField value={owner} onChange={setOwner} />
        <TextField
          label="Access rules (ACL)"
          hint="Comma-separated, as an authtoken's (bind:*.example.com, bind:app.example.com); none: every bind."
          value={acl}
          onChange={setAcl}
        />
      </CreateForm>
      <ResourceTable
        resource={keys}
        caption="SSH keys"
        empty={<>No SSH keys yet. Register one, then connect with ssh -R (docs/ssh.md).</>}
        columns={[
          { header: 'Description', cell: (k) => k.description || <code>{k.id}</code> },
          { header: 'Fingerprint', cell: (k) => <code>{k.fingerprint}</code> },
          { header: 'Owner', cell: (k) => ownerName(k.owner_id) },
          {
            header: 'ACL',
            cell: (k) =>
              k.acl.length ? <Chips values={k.acl} /> : <span className="muted">anything</span>,
          },
          { header: 'Created', cell: (k) => <When iso={k.created_at} /> },
        ]}
        deleteName={(k) => `SSH key ${k.description || k.fingerprint}`}
      />
    </>
  );
}
