import { useState } from 'react';
import type { Ref } from '../api';
import { CopyButton, DeleteButton, PageHeader } from '../components';
import { CreateForm, TextField } from '../fields';
import { useResource } from '../hooks';
import { ResourceCard, ResourceList } from '../resource';
import { DomainCertificate } from './domain-certificate';
import { TlsCertificates, type TlsCertificate } from './tls-certificates';

interface ReservedDomain {
  id: string;
  domain: string;
  description: string;
  cname_target: string | null;
  acme_challenge_cname_target: string | null;
  certificate: Ref | null;
  certificate_management_policy: { authority: string } | null;
  certificate_management_status: {
    renews_at: string | null;
    provisioning_job: { msg: string; error_code: string | null; retries_at: string | null } | null;
  } | null;
}

/** The DNS records a reserved domain needs, as rows of a table. */
function dnsRecords(d: ReservedDomain): Array<{ type: string; name: string; value: string }> {
  const rows: Array<{ type: string; name: string; value: string }> = [];
  if (d.cname_target) rows.push({ type: 'CNAME', name: d.domain, value: d.cname_target });
  if (d.acme_challenge_cname_target) {
    rows.push({
      type: 'CNAME',
      name: `_acme-challenge.${d.domain.replace(/^\*\./, '')}`,
      value: d.acme_challenge_cname_target,
    });
  }
  return rows;
}

function DnsTable({ domain }: { domain: ReservedDomain }) {
  const rows = dnsRecords(domain);
  if (rows.length === 0)
    return (
      <p className="muted">No DNS records needed: this name is under the server's base domain.</p>
    );
  const asText = rows.map((r) => `${r.name}\t${r.type}\t${r.value}`).join('\n');
  return (
    <div className="table-wrap">
      <table className="dns-records">
        <caption>DNS records to add for {domain.domain} at your DNS provider</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Type</th>
            <th scope="col">Value</th>
            <th scope="col">
              <span className="visually-hidden">Copy</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.name}>
              <td>
                <code>{r.name}</code>
              </td>
              <td>{r.type}</td>
              <td>
                <code>{r.value}</code>
              </td>
              <td>
                <CopyButton text={r.value} label={`Copy the ${r.type} value for ${r.name}`} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <CopyButton text={asText} label="Copy all records as text" />
    </div>
  );
}

function certificateStatus(d: ReservedDomain): string {
  if (d.certificate && !d.certificate_management_policy)
    return `Uploaded certificate ${d.certificate.id}`;
  const status = d.certificate_management_status;
  const job = status?.provisioning_job;
  // Without ACME nothing is being issued: the message says what to do instead.
  if (job?.error_code === 'ACME_NOT_CONFIGURED') return `Local CA only: ${job.msg}`;
  if (job) return job.error_code ? `Not issued yet: ${job.msg}` : `Being issued: ${job.msg}`;
  if (d.certificate)
    return status?.renews_at
      ? `Issued; renews ${new Date(status.renews_at).toLocaleString()}`
      : 'Issued';
  return d.certificate_management_policy ? 'Waiting to be issued' : 'Served by the local CA';
}

/** Reserved domains: names (and wildcards) agents may serve, with their DNS records and certificates. */
export function DomainsPage() {
  // Polled, so certificate status shows as it changes.
  const domains = useResource<ReservedDomain>('/reserved_domains', 'reserved_domains', {
    pollMs: 5000,
  });
  const certs = useResource<TlsCertificate>('/tls_certificates', 'tls_certificates');
  const reloadAll = async () => {
    await Promise.all([domains.reload(), certs.reload()]);
  };
  const [domain, setDomain] = useState('');
  const [created, setCreated] = useState<ReservedDomain | undefined>(undefined);
  const create = async () => {
    const reserved = await domains.create({ domain: domain.trim() });
    if (!reserved) return;
    setCreated(reserved);
    setDomain('');
  };
  return (
    <>
      <PageHeader title="Reserved domains">
        Reserve a name, or a wildcard such as <code>*.sitea.example.com</code>, so that agents may
        serve it (and every name under a wildcard). Then add the DNS records shown.
      </PageHeader>
      <CreateForm
        label="Reserve a domain"
        submit="Reserve domain"
        action={domains.action}
        onSubmit={create}
      >
        <TextField
          label="Domain"
          hint="e.g. app.example.com or *.sitea.example.com"
          value={domain}
          onChange={setDomain}
          required
        />
      </CreateForm>
      {created ? (
        <section className="card created" aria-label={`DNS records for ${created.domain}`}>
          <h2>Reserved {created.domain}: add these DNS records</h2>
          <DnsTable domain={created} />
        </section>
      ) : null}
      <ResourceList
        items={domains.items}
        error={domains.error}
        empty="No reserved domains yet. Reserve one above; agents can then bind it."
      >
        {(items) =>
          items.map((d) => (
            <ResourceCard
              key={d.id}
              label={d.domain}
              title={d.domain}
              actions={
                <DeleteButton name={`domain ${d.domain}`} onDelete={() => domains.remove(d)} />
              }
            >
              <p>
                Certificate:{' '}
                <span className="status" data-testid="certificate-status">
                  {certificateStatus(d)}
                </span>
              </p>
              <DomainCertificate domain={d} certs={certs.items} onSaved={reloadAll} />
              <details>
                <summary>DNS records</summary>
                <DnsTable domain={d} />
              </details>
            </ResourceCard>
          ))
        }
      </ResourceList>
      <TlsCertificates certs={certs} />
    </>
  );
}
