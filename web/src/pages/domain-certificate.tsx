import { useState } from 'react';
import type { Ref } from '../api';
import { ErrorMessage } from '../components';
import { SelectField } from '../fields';
import { useAction } from '../hooks';
import type { TlsCertificate } from './tls-certificates';

/** What a domain card needs of its domain to choose its certificate. */
export interface CertificateHolder {
  id: string;
  domain: string;
  certificate: Ref | null;
  certificate_management_policy: { authority: string } | null;
}

const MANAGED = 'managed';

/**
 * The certificate a reserved domain serves, by its Ref, and the switch between a managed one
 * (Burrow orders and renews it under a certificate_management_policy) and an uploaded one.
 */
export function DomainCertificate({
  domain,
  certs,
  onSaved,
}: {
  domain: CertificateHolder;
  certs: TlsCertificate[] | undefined;
  onSaved: () => Promise<void>;
}) {
  const current = domain.certificate_management_policy ? MANAGED : (domain.certificate?.id ?? '');
  const [choice, setChoice] = useState(current);
  const action = useAction();
  const uploaded = (certs ?? []).filter((c) => !c.managed);
  const save = async () => {
    // A domain takes either a policy or an uploaded certificate; the API swaps one for the other.
    const body =
      choice === MANAGED
        ? { certificate_management_policy: { authority: 'letsencrypt' } }
        : { certificate_id: choice };
    await action.send('PATCH', `/reserved_domains/${domain.id}`, body, onSaved);
  };
  return (
    <div className="domain-certificate">
      <p>
        Certificate Ref:{' '}
        <code data-testid="certificate-ref">{domain.certificate?.id ?? 'none yet'}</code>
      </p>
      <div className="inline-form">
        <SelectField label={`Certificate for ${domain.domain}`} value={choice} onChange={setChoice}>
          {current === '' ? <option value="">None (the local CA serves)</option> : null}
          <option value={MANAGED}>Managed: issued and renewed by Burrow</option>
          {uploaded.map((c) => (
            <option key={c.id} value={c.id}>
              Uploaded: {c.description || c.subject_common_name} ({c.id})
            </option>
          ))}
        </SelectField>
        <button
          type="button"
          className="secondary"
          onClick={() => void save()}
          disabled={action.busy || choice === current || choice === ''}
          aria-label={`Use this certificate for ${domain.domain}`}
        >
          Use this certificate
        </button>
      </div>
      <ErrorMessage error={action.error} />
    </div>
  );
}
