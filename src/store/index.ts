import { AcmeStateRepository } from './acme.js';
import { ApiKeyRepository } from './api-keys.js';
import { AuditEventRepository } from './audit-events.js';
import { BackendRepository } from './backends.js';
import { BotUserRepository } from './bot-users.js';
import { CertificateAuthorityRepository } from './certificate-authorities.js';
import { CloudEndpointRepository } from './cloud-endpoints.js';
import { ClusterRepository } from './cluster.js';
import { CredentialRepository } from './credentials.js';
import { DomainCertificateRepository } from './domain-certificates.js';
import type { Store } from './database.js';
import type { RepoDeps, StoreHooks, StoreSettings } from './deps.js';
import { EdgeRepository } from './edges.js';
import { IpPolicyRepository } from './ip-policies.js';
import { IpPolicyRuleRepository } from './ip-policy-rules.js';
import { ReservedAddrRepository } from './reserved-addrs.js';
import { ReservedDomainRepository } from './reserved-domains.js';
import { SettingsRepository } from './settings.js';
import { SshCredentialRepository } from './ssh-credentials.js';
import { TlsCertificateRepository } from './tls-certificates.js';
import { UserRepository } from './users.js';
import { SecretRepository, VaultRepository } from './vaults.js';
import { EventDestinationRepository } from './event-destinations.js';
import { EventSubscriptionRepository } from './event-subscriptions.js';

export { openStore, type Store, type StoreOptions } from './database.js';
export type { Page, PageRequest } from './paging.js';
export type { CloudEndpoint } from './cloud-endpoints.js';
export {
  ClusterRepository,
  type ClaimResult,
  type NodeRow,
  type OnlineSessionRow,
  type OnlineTunnelRow,
} from './cluster.js';
export { StoreNotifications, type StoreNotice } from './notifications.js';
export type { RepoDeps, StoreHooks, StoreSettings, TrafficPolicyValidator } from './deps.js';

/** Every repository, over one store. */
export interface Repositories {
  settings: SettingsRepository;
  apiKeys: ApiKeyRepository;
  botUsers: BotUserRepository;
  credentials: CredentialRepository;
  sshCredentials: SshCredentialRepository;
  reservedDomains: ReservedDomainRepository;
  reservedAddrs: ReservedAddrRepository;
  ipPolicies: IpPolicyRepository;
  ipPolicyRules: IpPolicyRuleRepository;
  certificateAuthorities: CertificateAuthorityRepository;
  backends: BackendRepository;
  edges: EdgeRepository;
  tlsCertificates: TlsCertificateRepository;
  domainCertificates: DomainCertificateRepository;
  acme: AcmeStateRepository;
  users: UserRepository;
  auditEvents: AuditEventRepository;
  cloudEndpoints: CloudEndpointRepository;
  vaults: VaultRepository;
  secrets: SecretRepository;
  eventDestinations: EventDestinationRepository;
  eventSubscriptions: EventSubscriptionRepository;
  /** The cluster's nodes and online state (meaningful on PostgreSQL; harmless on SQLite). */
  cluster: ClusterRepository;
}

/**
 * Build the repositories over an open store; `hooks` plug in what the store cannot import.
 * @example const repos = createRepositories(store, settings, { validateTrafficPolicy: validatePolicy });
 */
export function createRepositories(
  store: Store,
  settings: StoreSettings,
  hooks: StoreHooks = {},
): Repositories {
  const accountSettings = new SettingsRepository(store.db);
  const deps: RepoDeps = { ...hooks, db: store.db, settings, accountSettings };
  return {
    settings: accountSettings,
    apiKeys: new ApiKeyRepository(store.db, accountSettings),
    botUsers: new BotUserRepository(store.db),
    credentials: new CredentialRepository(deps),
    sshCredentials: new SshCredentialRepository(deps),
    reservedDomains: new ReservedDomainRepository(deps),
    reservedAddrs: new ReservedAddrRepository(deps),
    ipPolicies: new IpPolicyRepository(deps),
    ipPolicyRules: new IpPolicyRuleRepository(deps),
    certificateAuthorities: new CertificateAuthorityRepository(deps),
    backends: new BackendRepository(deps),
    edges: new EdgeRepository(deps),
    tlsCertificates: new TlsCertificateRepository(deps),
    domainCertificates: new DomainCertificateRepository(store.db),
    acme: new AcmeStateRepository(store.db),
    users: new UserRepository(store.db),
    auditEvents: new AuditEventRepository(store.db),
    cloudEndpoints: new CloudEndpointRepository(deps),
    vaults: new VaultRepository(deps),
    secrets: new SecretRepository(deps),
    eventDestinations: new EventDestinationRepository(deps),
    eventSubscriptions: new EventSubscriptionRepository(deps),
    cluster: new ClusterRepository(store.db, store.dialect),
  };
}
