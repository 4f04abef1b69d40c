import type { ManagedDomain } from '../../store/domain-certificates.js';
import type { CertificateManagementStatus } from '../../store/reserved-domains.js';

/**
 * What Burrow orders certificates for: each reserved domain with a certificate management policy,
 * and the base domain's wildcard when Burrow's DNS server can answer its DNS-01 challenge.
 */
export interface AcmeSubject {
  /** The lease and `managed_by` key: the reserved domain's id, or `base`. */
  key: string;
  /** The names on the certificate. */
  names: string[];
  keyType: 'ecdsa' | 'rsa';
  challenge: 'http-01' | 'dns-01';
  /** dns-01: the FQDN whose TXT record Burrow's DNS server publishes. */
  txtName?: string;
  /** The DNS records the user must have for the order to succeed, for error messages. */
  records: string[];
  certificateId: string | null;
  status: CertificateManagementStatus | null;
}

/** The subject for a reserved domain with a policy. */
export function domainSubject(domain: ManagedDomain): AcmeSubject {
  const common: Pick<AcmeSubject, 'key' | 'names' | 'keyType' | 'certificateId' | 'status'> = {
    key: domain.id,
    names: [domain.domain],
    keyType: domain.policy.private_key_type === 'rsa' ? 'rsa' : 'ecdsa',
    certificateId: domain.certificateId,
    status: domain.status,
  };
  const cname = domain.cnameTarget ? [`${domain.domain} CNAME ${domain.cnameTarget}`] : [];
  if (domain.domain.startsWith('*.')) {
    const base = domain.domain.slice(2);
    const target = domain.acmeChallengeTarget ?? '';
    return {
      ...common,
      challenge: 'dns-01',
      txtName: target,
      records: [`_acme-challenge.${base} CNAME ${target}`, ...cname],
    };
  }
  return { ...common, challenge: 'http-01', records: cname };
}

/** The subject for the base domain's wildcard, validated through Burrow's own DNS server. */
export function baseSubject(
  baseDomain: string,
  certificateId: string | null,
  status: CertificateManagementStatus | null,
): AcmeSubject {
  return {
    key: 'base',
    names: [`*.${baseDomain}`],
    keyType: 'ecdsa',
    challenge: 'dns-01',
    txtName: `_acme-challenge.${baseDomain}`,
    records: [`${baseDomain} NS <this server> (delegate the base domain to --dns-listen)`],
    certificateId,
    status,
  };
}

/** The subject for a name the server itself answers on, such as `--agent-hostname` (HTTP-01). */
export function hostSubject(
  name: string,
  certificateId: string | null,
  status: CertificateManagementStatus | null,
): AcmeSubject {
  return {
    key: `host:${name}`,
    names: [name],
    keyType: 'ecdsa',
    challenge: 'http-01',
    records: [`${name} A/AAAA <this server's public address> (port 80 reaches --http-listen)`],
    certificateId,
    status,
  };
}

/**
 * Why an order failed, for `provisioning_job`: DNS_ERROR when the CA could not validate the
 * challenge (the user's records are missing or wrong), INTERNAL_ERROR otherwise.
 * @example describeFailure(subject, err, true).error_code // 'DNS_ERROR'
 */
export function describeFailure(
  subject: AcmeSubject,
  err: unknown,
  validating: boolean,
): { error_code: 'DNS_ERROR' | 'INTERNAL_ERROR'; msg: string } {
  const detail = (err instanceof Error ? err.message : String(err)).slice(0, 300);
  if (validating) {
    const records = subject.records.length
      ? ` Check these DNS records: ${subject.records.join('; ')}.`
      : '';
    return {
      error_code: 'DNS_ERROR',
      msg: `The certificate authority could not validate ${subject.names.join(', ')} (${subject.challenge}).${records} The CA said: ${detail}`,
    };
  }
  return {
    error_code: 'INTERNAL_ERROR',
    msg: `Ordering a certificate for ${subject.names.join(', ')} failed; it is retried automatically. Cause: ${detail}`,
  };
}
