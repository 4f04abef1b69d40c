import type { ColumnType } from 'kysely';

/**
 * Table shapes. Portable across SQLite and PostgreSQL: times are RFC 3339 text, booleans are
 * integers 0/1, lists and objects are JSON text, ids are text compared byte-wise.
 */
export interface Database {
  settings: SettingsTable;
  api_keys: ApiKeysTable;
  bot_users: BotUsersTable;
  credentials: CredentialsTable;
  ssh_credentials: SshCredentialsTable;
  reserved_domains: ReservedDomainsTable;
  reserved_addrs: ReservedAddrsTable;
  ip_policies: IpPoliciesTable;
  ip_policy_rules: IpPolicyRulesTable;
  backends: BackendsTable;
  certificate_authorities: CertificateAuthoritiesTable;
  edges: EdgesTable;
  edge_hostports: EdgeHostportsTable;
  refs: RefsTable;
  tls_certificates: TlsCertificatesTable;
  acme_challenges: AcmeChallengesTable;
  acme_leases: AcmeLeasesTable;
  users: UsersTable;
  user_sessions: UserSessionsTable;
  user_setup_tokens: UserSetupTokensTable;
  audit_events: AuditEventsTable;
  nodes: NodesTable;
  online_sessions: OnlineSessionsTable;
  online_tunnels: OnlineTunnelsTable;
  vaults: VaultsTable;
  secrets: SecretsTable;
  event_destinations: EventDestinationsTable;
  event_subscriptions: EventSubscriptionsTable;
}

/** Columns every user-facing resource has. */
export interface ResourceColumns {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface ApiKeysTable extends ResourceColumns {
  owner_id: string;
  token_hash: string;
  /** A role narrower than the owner's (migration 0008-roles); null: the owner's. */
  role: string | null;
  /** JSON list of scopes such as `endpoints:write`; null: every resource the role allows. */
  scopes: string | null;
}

export interface BotUsersTable {
  id: string;
  name: string;
  active: number;
  created_at: string;
}

export interface CredentialsTable extends ResourceColumns {
  owner_id: string;
  /** JSON array of rule strings. */
  acl: string;
  token_hash: string;
}

/** A public key that opens tunnels with `ssh -R` (migration 0009-ssh-credentials). */
export interface SshCredentialsTable extends ResourceColumns {
  owner_id: string;
  /** JSON array of rule strings, as credentials.acl. */
  acl: string;
  /** `<type> <base64>`: the OpenSSH public key line without its comment. */
  public_key: string;
  /** `SHA256:<base64>` of the key blob, as `ssh-keygen -lf` prints it; unique. */
  fingerprint: string;
}

export interface ReservedDomainsTable extends ResourceColumns {
  domain: string;
  region: string;
  cname_target: string | null;
  acme_challenge_cname_target: string | null;
  /** JSON `{authority, private_key_type}` or null. */
  certificate_management_policy: string | null;
  /** JSON `{renews_at, provisioning_job}` or null. */
  certificate_management_status: string | null;
  /** The certificate served for the domain (uploaded, or issued under the policy), or null. */
  certificate_id: string | null;
}

export interface ReservedAddrsTable extends ResourceColumns {
  addr: string;
  port: number;
  region: string;
}

export type IpPoliciesTable = ResourceColumns;

export interface IpPolicyRulesTable extends ResourceColumns {
  ip_policy_id: string;
  cidr: string;
  action: string;
}

export interface BackendsTable extends ResourceColumns {
  /** tunnel_group, failover, weighted or static. */
  type: string;
  /** JSON of the type's own fields (labels, backends, address...). */
  config: string;
}

export interface CertificateAuthoritiesTable extends ResourceColumns {
  ca_pem: string;
  subject_common_name: string;
  not_before: string;
  not_after: string;
  /** JSON arrays of usage names. */
  key_usages: string;
  extended_key_usages: string;
}

export interface EdgesTable extends ResourceColumns {
  /** tcp or tls. */
  type: string;
  /** JSON array or null. */
  hostports: string | null;
  /** Each module: JSON of its stored (mutate) shape, or null when unset. */
  backend: string | null;
  ip_restriction: string | null;
  traffic_policy: string | null;
  mutual_tls: string | null;
  tls_termination: string | null;
}

/** One row per hostport in use: the primary key makes a hostport belong to one edge. */
export interface EdgeHostportsTable {
  hostport: string;
  edge_id: string;
  /** The reserved address (ra_) or domain (rd_) the hostport stands on. */
  target_id: string;
}

/** References between resources, so a delete can name what still uses a resource. */
export interface RefsTable {
  from_id: string;
  to_id: string;
}

export interface TlsCertificatesTable extends ResourceColumns {
  /** The chain, leaf first. */
  certificate_pem: string;
  /** Never leaves the store except into a TLS context. */
  private_key_pem: string;
  /** rsa, ecdsa or ed25519. */
  private_key_type: string;
  subject_common_name: string;
  /** JSON arrays of the leaf's DNS and IP subject alternative names. */
  dns_names: string;
  ips: string;
  issuer_common_name: string;
  serial_number: string;
  not_before: string;
  not_after: string;
  /** Null for an uploaded certificate; the ACME subject (`rd_…` or `base`) for an issued one. */
  managed_by: string | null;
}

/** A challenge answer the CA may ask any process for. */
export interface AcmeChallengesTable {
  id: string;
  /** http-01 (name: the token) or dns-01 (name: the TXT record's FQDN). */
  kind: string;
  name: string;
  value: string;
  expires_ms: number;
}

/** Who orders a certificate for a subject right now. */
export interface AcmeLeasesTable {
  subject: string;
  holder: string;
  expires_ms: number;
}

/** A dashboard user: a person with a name and a scrypt password hash (core/passwords.ts). */
export interface UsersTable {
  id: string;
  name: string;
  password_hash: string;
  created_at: string;
  /** 'admin', 'operator' or 'viewer' (migration 0008-roles). */
  role: ColumnType<string, string | undefined, string>;
  /** `<issuer> <sub>` of a user who signs in with OpenID Connect; null for password users. */
  oidc_subject: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A signed-in browser; the cookie holds the token, the table its SHA-256 only. */
export interface UserSessionsTable {
  token_hash: string;
  user_id: string;
  created_at: string;
  expires_ms: number;
}

/** The first-start setup link's token, hashed; gone once used. */
export interface UserSetupTokensTable {
  token_hash: string;
  expires_ms: number;
}

/** One change made through the API or dashboard (migration 0005-audit). */
export interface AuditEventsTable {
  id: string;
  created_at: string;
  /** The request's Operation-Id. */
  operation_id: string;
  /** 'api_key', 'user' (dashboard session) or 'none' (sign-in and setup, before a principal). */
  actor_type: string;
  actor_id: string | null;
  method: string;
  path: string;
  status_code: number;
  resource_id: string | null;
  client_ip: string;
  /** The owner of the API key that made the change (migration 0008-roles); null otherwise. */
  actor_owner_id: string | null;
}

/** A server process of the cluster (migration 0006-cluster). */
export interface NodesTable {
  id: string;
  /** 'all', 'api' or 'edge'. */
  role: string;
  /** Where other nodes reach this one's node link; '' when it has none. */
  link_address: string;
  started_at: string;
  /**
   * Last heartbeat, by the database's clock: timestamptz on PostgreSQL (read as a Date), RFC 3339
   * text on SQLite. Written only as the database's now() and read only as an age, so its
   * JavaScript type never matters.
   */
  heartbeat_at: ColumnType<Date | string, string | undefined, string>;
}

/** An agent session online on a node; `data` is JSON of its display fields. */
export interface OnlineSessionsTable {
  id: string;
  node_id: string;
  credential_id: string;
  data: string;
}

/** A tunnel online on a node; `data` is JSON of its fields (bindId, url, hostname...). */
export interface OnlineTunnelsTable {
  id: string;
  session_id: string;
  node_id: string;
  /** Where it is served: 'h:<hostname>', 'p:<port>' or 'i:<internal>'; null for labeled tunnels. */
  route_key: string | null;
  /** 0 or 1. */
  pooling: number;
  data: string;
}

/** A vault: a named group of secrets that traffic policies read with `secrets.get`. */
export interface VaultsTable extends ResourceColumns {
  name: string;
  updated_at: string;
}

/** A secret of a vault. The value is never stored in clear: see src/store/secret-box.ts. */
export interface SecretsTable extends ResourceColumns {
  vault_id: string;
  name: string;
  /** `v1:` then base64 of the AES-256-GCM nonce, tag and ciphertext. */
  value_encrypted: string;
  updated_at: string;
}

/** Where traffic events go (migration 0010-event-destinations). */
export interface EventDestinationsTable extends ResourceColumns {
  /** `json`, the only format. */
  format: string;
  /** `webhook`, `file` or `opentelemetry`. */
  kind: string;
  /** JSON of the kind's settings, without the signing secret. */
  target: string;
  /** A webhook's signing secret, sealed as vault secrets are (secret-box.ts); null otherwise. */
  secret_encrypted: string | null;
}

/** Which event types go to which destinations. */
export interface EventSubscriptionsTable extends ResourceColumns {
  /** JSON list of event types, e.g. `["tcp_connection_closed.v0"]`. */
  sources: string;
  /** JSON list of `ed_…` ids. */
  destination_ids: string;
}
