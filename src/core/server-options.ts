/**
 * The table of server options: for each, the ServerConfig field it sets, its kebab-case name (the
 * flag without dashes, the config-file key, and, upper-cased, the `BURROW_` environment
 * variable), what it does and its default. The `burrow server` flags are made from it
 * (cli/main.ts) and config.ts reads the values by it; docs/configuration.md is the same table for
 * people.
 */
import type { ServerConfig } from './config.js';
import { CLUSTER_OPTIONS } from './cluster-config.js';
import { LIMIT_OPTIONS } from './limits.js';
import { GEOIP_OPTIONS, OAUTH_APP_OPTIONS } from './policy-data-options.js';
import { DASHBOARD_OIDC_OPTIONS } from './dashboard-oidc-options.js';

/**
 * The environment variable of the option named `name`: `BURROW_` and the name upper-cased, dashes
 * as underscores.
 * @example envName('api-listen') // 'BURROW_API_LISTEN'
 */
export function envName(name: string): string {
  return 'BURROW_' + name.toUpperCase().replace(/-/g, '_');
}

/** One option as the CLI, the environment and config files see it. */
export interface OptionSpec {
  key: keyof ServerConfig;
  /** Kebab-case name: the flag without dashes and the config-file key. */
  name: string;
  description: string;
  default: string;
  /** The flag may be given more than once; its values join with commas (the list form). */
  repeatable?: boolean;
}

/** Every server option, in the order `burrow server --help` lists them. */
export const SERVER_OPTIONS: readonly OptionSpec[] = [
  {
    key: 'dataDir',
    name: 'data-dir',
    description: 'data folder (SQLite file, CA, keys)',
    default: './burrow-data',
  },
  {
    key: 'database',
    name: 'database',
    description: 'database: empty for SQLite in the data folder, or a postgres:// URL',
    default: '',
  },
  {
    key: 'role',
    name: 'role',
    description: 'what this process runs: api, edge or all',
    default: 'all',
  },
  {
    key: 'apiListen',
    name: 'api-listen',
    description: 'API and dashboard listener host:port',
    default: '127.0.0.1:4000',
  },
  {
    key: 'publicApiUrl',
    name: 'public-api-url',
    description: 'public URL of the API, used in uri fields (default http://<api-listen>)',
    default: '',
  },
  {
    key: 'agentListen',
    name: 'agent-listen',
    description: 'agent connections (TLS) host:port',
    default: '127.0.0.1:4443',
  },
  {
    key: 'httpListen',
    name: 'http-listen',
    description: 'public HTTP ingress host:port',
    default: '127.0.0.1:8080',
  },
  {
    key: 'httpsListen',
    name: 'https-listen',
    description: 'public HTTPS/TLS ingress host:port (SNI)',
    default: '127.0.0.1:8443',
  },
  {
    key: 'metricsListen',
    name: 'metrics-listen',
    description:
      'separate Prometheus metrics listener host:port (default: /metrics on the API listener)',
    default: '',
  },
  {
    key: 'baseDomain',
    name: 'base-domain',
    description: 'base domain for random endpoint names',
    default: 'burrow.localhost',
  },
  {
    key: 'tcpHost',
    name: 'tcp-host',
    description: 'host name of public TCP addresses',
    default: 'localhost',
  },
  {
    key: 'tcpPorts',
    name: 'tcp-ports',
    description: 'port range of public TCP addresses, first-last',
    default: '20000-20999',
  },
  {
    key: 'apiRateLimit',
    name: 'api-rate-limit',
    description: 'API requests allowed per API key, as <count>/<seconds>s; 0 turns the limit off',
    default: '1200/60s',
  },
  {
    key: 'logLevel',
    name: 'log-level',
    description: 'log level: fatal, error, warn, info, debug, trace or silent',
    default: 'info',
  },
  {
    key: 'acmeDirectory',
    name: 'acme-directory',
    description:
      "ACME directory URL (e.g. Let's Encrypt staging or production); empty: the local CA signs every certificate",
    default: '',
  },
  {
    key: 'acmeEmail',
    name: 'acme-email',
    description: 'contact email for the ACME account',
    default: '',
  },
  {
    key: 'acmeCaCert',
    name: 'acme-ca-cert',
    description:
      "PEM file of a CA to trust for the ACME directory's own HTTPS (private and test CAs)",
    default: '',
  },
  {
    key: 'acmeEabKid',
    name: 'acme-eab-kid',
    description: 'external account binding key id, for CAs that need one',
    default: '',
  },
  {
    key: 'acmeEabHmacKey',
    name: 'acme-eab-hmac-key',
    description: 'external account binding HMAC key (base64url), with --acme-eab-kid',
    default: '',
  },
  {
    key: 'acmeRenewAfter',
    name: 'acme-renew-after',
    description: 'renew a certificate once this fraction of its lifetime has passed',
    default: '0.6667',
  },
  {
    key: 'acmeRetryMin',
    name: 'acme-retry-min',
    description: 'seconds before the first retry of a failed order; doubles up to 3600',
    default: '60',
  },
  {
    key: 'agentHostname',
    name: 'agent-hostname',
    description:
      'the host name agents dial (e.g. connect.example.com): in the agent certificate, and given a trusted certificate when ACME is on',
    default: '',
  },
  {
    key: 'dnsListen',
    name: 'dns-listen',
    description:
      'authoritative DNS server host:port (UDP and TCP) for ACME DNS-01 challenges and the base domain; empty: none',
    default: '',
  },
  {
    key: 'sshListen',
    name: 'ssh-listen',
    description:
      "SSH tunnels' listener host:port (ssh -R 0:localhost:3000 -p <port> <host> http; docs/ssh.md); a bare port is on 127.0.0.1; empty: none",
    default: '',
  },
  {
    key: 'publicIp',
    name: 'public-ip',
    description:
      'comma-separated addresses the DNS server answers (A/AAAA) for the base domain and every name under it',
    default: '',
  },
  {
    key: 'logFormat',
    name: 'log-format',
    description:
      'log lines: auto (readable and coloured on a terminal, JSON when piped), json or pretty',
    default: 'auto',
  },
  {
    key: 'inspectRedactHeaders',
    name: 'inspect-redact-header',
    description:
      'a header name the traffic inspector redacts besides Authorization, Proxy-Authorization, Cookie and Set-Cookie; repeat the flag or separate names with commas',
    default: '',
    repeatable: true,
  },
  {
    key: 'egressAllow',
    name: 'egress-allow',
    description:
      "a CIDR block, address or host name that traffic policies may make the edge fetch from (JWKS, OpenID discovery, token endpoints) though it is loopback, private, link-local or the node's own; repeat the flag or separate entries with commas",
    default: '',
    repeatable: true,
  },
  // Traffic policies' data (policy-data-options.ts): read by parseGeoipFiles, parseOAuthApps.
  ...GEOIP_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'geoip' })),
  ...OAUTH_APP_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'oauthApps' })),
  // Dashboard sign-in with OpenID Connect (dashboard-oidc-options.ts): read by parseDashboardOidc.
  ...DASHBOARD_OIDC_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'dashboardOidc' })),
  // Limits (limits.ts): their values are read by parseLimits, not by key.
  ...LIMIT_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'limits' })),
  // Cluster options (cluster-config.ts): read by parseClusterConfig.
  ...CLUSTER_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'cluster' })),
];
