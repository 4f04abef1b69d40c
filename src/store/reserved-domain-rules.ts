import { CODES, ValidationError } from '../core/errors.js';
import { hostnameProblem } from '../core/hostname.js';
import { quote } from '../core/quote.js';

/**
 * The rules of reserved domains: their shapes, which names may be reserved, which certificate
 * policies are valid, and what a new domain's certificate status says.
 */

/** How certificates for a custom domain are to be obtained. */
export interface CertificateManagementPolicy {
  authority: string;
  private_key_type: string;
}

/** The latest attempt to obtain a certificate. */
export interface ProvisioningJob {
  error_code: string | null;
  msg: string;
  started_at: string;
  retries_at: string | null;
}

export interface CertificateManagementStatus {
  renews_at: string | null;
  provisioning_job: ProvisioningJob | null;
}

/** A reserved domain, possibly a wildcard (`*.sitea.example.com`), as stored. */
export interface ReservedDomain {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  domain: string;
  region: string;
  cname_target: string | null;
  acme_challenge_cname_target: string | null;
  certificate_management_policy: CertificateManagementPolicy | null;
  certificate_management_status: CertificateManagementStatus | null;
  /** The certificate served for the domain: uploaded, or issued under the policy. */
  certificate_id: string | null;
}

/** A policy as a client sends it: both fields default. */
export interface CertificateManagementPolicyInput {
  authority?: string | undefined;
  private_key_type?: string | undefined;
}

export interface ReservedDomainCreate {
  domain: string;
  region?: string | undefined;
  description?: string | undefined;
  metadata?: string | undefined;
  certificate_management_policy?: CertificateManagementPolicyInput | undefined;
  /** An uploaded certificate (`cert_…`) to serve instead of a managed one. */
  certificate_id?: string | undefined;
}

export type ReservedDomainUpdate = Pick<
  ReservedDomainCreate,
  'description' | 'metadata' | 'certificate_management_policy' | 'certificate_id'
>;

export const CERTIFICATE_AUTHORITIES: readonly string[] = ['letsencrypt'];
export const PRIVATE_KEY_TYPES: readonly string[] = ['ecdsa', 'rsa'];

/** The policy a custom domain gets when the create request names none. */
export const DEFAULT_CERTIFICATE_POLICY: CertificateManagementPolicy = {
  authority: 'letsencrypt',
  private_key_type: 'ecdsa',
};

/** What the provisioning job says while an ACME order is on its way. */
export const PROVISIONING_MESSAGE = 'Managed certificate provisioning in progress.';

/** What the provisioning job says while the server has no ACME client configured. */
export const LOCAL_CA_MESSAGE =
  "no ACME directory configured: upload a certificate or start with --acme-directory. Until then the server's local CA (ca.pem in its data folder) issues this domain's certificate, which clients must trust.";

/**
 * The provisioning job's error_code while the server has no ACME client: nothing is being
 * issued, and the dashboard says so instead of "Being issued".
 */
export const ACME_NOT_CONFIGURED = 'ACME_NOT_CONFIGURED';

export const POLICY_FIELD = 'certificate_management_policy';
const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Lowercase, without a trailing root dot: the form domains are stored and compared in. */
export function normalizeDomain(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') && lower.length > 1 ? lower.slice(0, -1) : lower;
}

/** Throw the error that names what is wrong with `domain` (already normalized), if anything. */
export function checkDomain(domain: string, baseDomain: string): void {
  const problem = hostnameProblem(domain, true);
  const invalid = (rule: string) =>
    new ValidationError(CODES.invalidDomain, 'domain', `${quote(domain)} is not valid: ${rule}`);
  switch (problem) {
    case undefined:
      break;
    case 'empty':
      throw new ValidationError(CODES.invalidDomain, 'domain', 'must not be empty');
    case 'too-long':
      throw new ValidationError(
        CODES.invalidDomain,
        'domain',
        `must be at most 253 characters, got ${domain.length}`,
      );
    case 'wildcard':
      throw new ValidationError(
        CODES.wildcardNotFirstLabel,
        'domain',
        `${quote(domain)} is not valid: '*' may only be the whole first label, as in *.example.com`,
      );
    case 'single-label':
      throw invalid(
        domain.startsWith('*.')
          ? "a wildcard needs at least two labels after '*.', as in *.example.com"
          : 'a domain needs at least two labels, as in app.example.com',
      );
    case 'bad-label': {
      const label = domain.split('.').find((l) => l !== '*' && !LABEL_RE.test(l)) ?? '';
      throw invalid(
        label.length > 63
          ? `the label ${quote(label)} is longer than 63 characters`
          : `the label ${quote(label)} must be 1-63 letters, digits or hyphens, and must not start or end with a hyphen`,
      );
    }
  }
  if (domain === baseDomain) {
    throw invalid(`it is the server's base domain; reserve a name under it, such as app.${domain}`);
  }
}

/** The policy to store for `input`, with defaults filled in; 420 naming the field otherwise. */
export function checkPolicy(input: CertificateManagementPolicyInput): CertificateManagementPolicy {
  const authority = (input.authority ?? DEFAULT_CERTIFICATE_POLICY.authority).toLowerCase();
  const keyType = (
    input.private_key_type ?? DEFAULT_CERTIFICATE_POLICY.private_key_type
  ).toLowerCase();
  if (!CERTIFICATE_AUTHORITIES.includes(authority)) {
    throw new ValidationError(
      CODES.invalidCertificatePolicy,
      `${POLICY_FIELD}.authority`,
      `must be ${CERTIFICATE_AUTHORITIES.map((a) => `'${a}'`).join(' or ')}, got ${quote(String(input.authority))}`,
    );
  }
  if (!PRIVATE_KEY_TYPES.includes(keyType)) {
    throw new ValidationError(
      CODES.invalidCertificatePolicy,
      `${POLICY_FIELD}.private_key_type`,
      `must be ${PRIVATE_KEY_TYPES.map((t) => `'${t}'`).join(' or ')}, got ${quote(String(input.private_key_type))}`,
    );
  }
  return { authority, private_key_type: keyType };
}

/** A new policy's status: ordering when ACME is on, the local CA's note when it is off. */
export function initialStatus(startedAt: string, acme: boolean): CertificateManagementStatus {
  return {
    renews_at: null,
    provisioning_job: {
      error_code: acme ? null : ACME_NOT_CONFIGURED,
      msg: acme ? PROVISIONING_MESSAGE : LOCAL_CA_MESSAGE,
      started_at: startedAt,
      retries_at: null,
    },
  };
}
