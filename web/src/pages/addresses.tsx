import { useState } from 'react';
import { CopyButton, PageHeader } from '../components';
import { CreateForm, TextField } from '../fields';
import { useResource } from '../hooks';
import { ResourceTable } from '../resource';

export interface ReservedAddr {
  id: string;
  addr: string;
  description: string;
  region: string;
}

/** TCP addresses: reserved host:port pairs for TCP edges and tcp tunnels. */
export function AddressesPage() {
  const addrs = useResource<ReservedAddr>('/reserved_addrs', 'reserved_addrs');
  const [description, setDescription] = useState('');
  const create = async () => {
    if (await addrs.create({ description })) setDescription('');
  };
  return (
    <>
      <PageHeader title="TCP addresses">
        A reserved address is a public host:port that stays yours: point a TCP edge at it, or bind a
        tcp tunnel to it from an agent.
      </PageHeader>
      <CreateForm
        label="Reserve a TCP address"
        submit="Reserve an address"
        action={addrs.action}
        onSubmit={create}
      >
        <TextField
          label="Description"
          hint="e.g. “ssh to the build box”. The port is picked for you."
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
      </CreateForm>
      <ResourceTable
        resource={addrs}
        caption="TCP addresses"
        empty="No TCP addresses yet. Reserve one, then create a TCP edge on it (Edges page)."
        columns={[
          {
            header: 'Address',
            cell: (a) => (
              <>
                <code>{a.addr}</code> <CopyButton text={a.addr} label={`Copy ${a.addr}`} />
              </>
            ),
          },
          { header: 'Description', cell: (a) => a.description },
          { header: 'ID', cell: (a) => <code>{a.id}</code> },
        ]}
        deleteName={(a) => `address ${a.addr}`}
      />
    </>
  );
}
