import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { BurrowError, CODES, NO_HTTP_STATUS } from './errors.js';
import { parseHostPort } from './host-port.js';
import { hostnameProblem } from './hostname.js';
import { LIMIT_OPTIONS, parseLimits, type ServerLimits } from './limits.js';
import { CLUSTER_OPTIONS, parseClusterConfig, type ClusterConfig } from './cluster-config.js';

/**
 * Server configuration. Every option has a flag (`--api-listen`), an environment variable
 * (`BURROW_API_LISTEN`) and a config-file key (`api-listen`); precedence is flag, then environment,
 * then file, then default.
 */
export interface ServerConfig {
  dataDir: string;
  /** Empty: SQLite in the data folder. Otherwise a `postgres://` URL. */
  database: string;
  role: 'all' | 'api' | 'edge';
  apiListen: string;
  publicApiUrl: string;
  agentListen: string;
  httpListen: string;
  httpsListen: string;
  metricsListen: string;
  baseDomain: string;
  tcpHost: string;
  tcpPorts: { first: number; last: number };
  /** Requests per window per API key; 0 turns rate limiting off. */
  apiRateLimit: { max: number; windowSeconds: number };
  logLevel: string;
  /** ACME directory URL; empty: certificates come from the local CA. */
  acmeDirectory: string;
  acmeEmail: string;
  /** PEM text (read from the file given) trusted for the directory's own HTTPS, besides the system's. */
  acmeCaCert: string;
  /** External account binding, both or neither. */
  acmeEabKid: string;
  acmeEabHmacKey: string;
  /** Fraction of a certificate's lifetime after which it is renewed (default 2/3). */
  acmeRenewAfter: number;
  /** First retry delay after a failed order, in seconds; doubles up to an hour. */
  acmeRetryMin: number;
  /** The name agents dial: in the agent listener's certificate, and ordered by ACME when on. */
  agentHostname: string;
  /** Authoritative DNS (UDP and TCP) host:port; empty: no DNS server. */
  dnsListen: string;
  /** Addresses the DNS server answers for the base domain and every name under it. */
  publicIp: string[];
  /** Limits of every listener (limits.ts; one table in docs/security.md). */
  limits: ServerLimits;
  /** This process as a node of a cluster on PostgreSQL (cluster-config.ts). */
  cluster: ClusterConfig;
  /** `auto`: coloured lines on a terminal, JSON otherwise; `json` or `pretty` force one. */
  logFormat: 'auto' | 'json' | 'pretty';
}

/** One option as the CLI, the environment and config files see it. */
export interface OptionSpec {
  key: keyof ServerConfig;
  /** Kebab-case name: the flag without dashes and the config-file key. */
  name: string;
  description: string;
  default: string;
}

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
  // Limits (limits.ts): their values are read by parseLimits, not by key.
  ...LIMIT_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'limits' })),
  // Cluster options (cluster-config.ts): read by parseClusterConfig.
  ...CLUSTER_OPTIONS.map((o): OptionSpec => ({ ...o, key: 'cluster' })),
];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * A configuration value that cannot be used; the message names the option and the rule. Its code
 * is `ERR_BURROW_CONFIG`.
 */
export class ConfigError extends BurrowError {
  constructor(option: string, rule: string, options?: { cause?: unknown }) {
    super(CODES.invalidConfig, NO_HTTP_STATUS, `--${option}: ${rule}`, {}, options);
  }
}

function envName(name: string): string {
  return 'BURROW_' + name.toUpperCase().replace(/-/g, '_');
}

function parseListen(name: string, value: string): string {
  if (!parseHostPort(value, { minPort: 1 }))
    throw new ConfigError(name, `'${value}' must be host:port, e.g. 127.0.0.1:4000`);
  return value;
}

function parsePortRange(value: string): { first: number; last: number } {
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(value);
  const first = Number(m?.[1]);
  const last = Number(m?.[2]);
  if (!m || first < 1 || last > 65535 || first > last) {
    throw new ConfigError(
      'tcp-ports',
      `'${value}' must be a range first-last within 1-65535, e.g. 20000-20999`,
    );
  }
  return { first, last };
}

function parseRateLimit(value: string): { max: number; windowSeconds: number } {
  if (value === '0') return { max: 0, windowSeconds: 60 };
  const m = /^(\d+)\/(\d+)s$/.exec(value);
  if (!m || Number(m[2]) < 1) {
    throw new ConfigError(
      'api-rate-limit',
      `'${value}' must be <count>/<seconds>s (e.g. 1200/60s) or 0`,
    );
  }
  return { max: Number(m[1]), windowSeconds: Number(m[2]) };
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError('config', `cannot read ${path}: ${(err as Error).message}`);
  }
  const doc: unknown = parseYaml(text);
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError('config', `${path} must hold a mapping of option names to values`);
  }
  const known = new Set(SERVER_OPTIONS.map((o) => o.name));
  for (const key of Object.keys(doc)) {
    if (!known.has(key))
      throw new ConfigError(
        'config',
        `${path}: unknown key '${key}'; keys are the flag names, e.g. api-listen`,
      );
  }
  return doc as Record<string, unknown>;
}

/**
 * Resolve the server configuration from flags (kebab-case names to strings), the environment and an
 * optional config file.
 * @example loadServerConfig({ 'api-listen': '127.0.0.1:5000' }, process.env)
 */
export function loadServerConfig(
  flags: Record<string, string | undefined>,
  env: NodeJS.ProcessEnv = process.env,
  configPath: string | undefined = flags.config ?? env.BURROW_CONFIG,
): ServerConfig {
  const file = configPath ? readConfigFile(configPath) : {};
  const raw = (name: string, def: string): string => {
    const fromFlag = flags[name];
    if (fromFlag !== undefined) return fromFlag;
    const fromEnv = env[envName(name)];
    if (fromEnv !== undefined) return fromEnv;
    const fromFile = file[name];
    if (
      typeof fromFile === 'string' ||
      typeof fromFile === 'number' ||
      typeof fromFile === 'boolean'
    ) {
      return String(fromFile);
    }
    if (fromFile !== undefined && fromFile !== null) {
      throw new ConfigError('config', `key '${name}' must be a string or number`);
    }
    return def;
  };
  const get = (key: keyof ServerConfig): string => {
    const spec = SERVER_OPTIONS.find((o) => o.key === key)!;
    return raw(spec.name, spec.default);
  };
  const role = get('role');
  if (role !== 'all' && role !== 'api' && role !== 'edge') {
    throw new ConfigError('role', `'${role}' must be one of api, edge, all`);
  }
  const database = get('database');
  if (database && !/^postgres(ql)?:\/\//.test(database)) {
    throw new ConfigError('database', `'${database}' must be empty (SQLite) or a postgres:// URL`);
  }
  const apiListen = parseListen('api-listen', get('apiListen'));
  const publicApiUrl = (get('publicApiUrl') || `http://${apiListen}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+(\/.*)?$/.test(publicApiUrl)) {
    throw new ConfigError('public-api-url', `'${publicApiUrl}' must be an http:// or https:// URL`);
  }
  const metricsListen = get('metricsListen');
  const dnsListen = get('dnsListen');
  const logLevel = get('logLevel');
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('log-level', `'${logLevel}' must be one of ${LOG_LEVELS.join(', ')}`);
  }
  return {
    dataDir: resolve(get('dataDir')),
    database,
    role,
    apiListen,
    publicApiUrl,
    agentListen: parseListen('agent-listen', get('agentListen')),
    httpListen: parseListen('http-listen', get('httpListen')),
    httpsListen: parseListen('https-listen', get('httpsListen')),
    metricsListen: metricsListen ? parseListen('metrics-listen', metricsListen) : '',
    baseDomain: get('baseDomain').toLowerCase(),
    tcpHost: get('tcpHost').toLowerCase(),
    tcpPorts: parsePortRange(get('tcpPorts')),
    apiRateLimit: parseRateLimit(get('apiRateLimit')),
    logLevel,
    ...acmeConfig(get),
    agentHostname: parseAgentHostname(get('agentHostname')),
    dnsListen: dnsListen ? parseListen('dns-listen', dnsListen) : '',
    publicIp: parsePublicIps(get('publicIp')),
    limits: parseLimits(raw, (name, rule) => new ConfigError(name, rule)),
    cluster: parseClusterConfig(raw, (name, rule) => new ConfigError(name, rule)),
    logFormat: parseLogFormat(get('logFormat')),
  };
}

type AcmeKeys =
  | 'acmeDirectory'
  | 'acmeEmail'
  | 'acmeCaCert'
  | 'acmeEabKid'
  | 'acmeEabHmacKey'
  | 'acmeRenewAfter'
  | 'acmeRetryMin';

function acmeConfig(get: (key: keyof ServerConfig) => string): Pick<ServerConfig, AcmeKeys> {
  const directory = get('acmeDirectory');
  if (directory && !/^https?:\/\/[^/]+/.test(directory)) {
    throw new ConfigError(
      'acme-directory',
      `'${directory}' must be the directory URL, e.g. https://acme-staging-v02.api.letsencrypt.org/directory (http:// only for a CA on this machine)`,
    );
  }
  const caFile = get('acmeCaCert');
  let caPem = '';
  if (caFile) {
    try {
      caPem = readFileSync(caFile, 'utf8');
    } catch (err) {
      throw new ConfigError(
        'acme-ca-cert',
        `cannot read ${caFile}: ${(err as Error).message}; give the path of a readable PEM file`,
      );
    }
    if (!caPem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new ConfigError(
        'acme-ca-cert',
        `${caFile} holds no PEM certificate: give a file with a -----BEGIN CERTIFICATE----- block`,
      );
    }
  }
  const kid = get('acmeEabKid');
  const hmac = get('acmeEabHmacKey');
  if (Boolean(kid) !== Boolean(hmac)) {
    throw new ConfigError(
      kid ? 'acme-eab-hmac-key' : 'acme-eab-kid',
      'external account binding needs both --acme-eab-kid and --acme-eab-hmac-key',
    );
  }
  const renewAfter = Number(get('acmeRenewAfter'));
  if (!(renewAfter >= 0 && renewAfter < 1)) {
    throw new ConfigError(
      'acme-renew-after',
      `'${get('acmeRenewAfter')}' must be a fraction in [0, 1)`,
    );
  }
  const retryMin = Number(get('acmeRetryMin'));
  if (!(retryMin >= 1 && retryMin <= 3600)) {
    throw new ConfigError('acme-retry-min', `'${get('acmeRetryMin')}' must be 1-3600 seconds`);
  }
  return {
    acmeDirectory: directory,
    acmeEmail: get('acmeEmail'),
    acmeCaCert: caPem,
    acmeEabKid: kid,
    acmeEabHmacKey: hmac,
    acmeRenewAfter: renewAfter,
    acmeRetryMin: retryMin,
  };
}

function parseAgentHostname(value: string): string {
  const name = value.toLowerCase().replace(/\.$/, '');
  if (name !== '' && hostnameProblem(name, false) !== undefined) {
    throw new ConfigError(
      'agent-hostname',
      `'${value}' must be a host name like connect.example.com`,
    );
  }
  return name;
}

function parsePublicIps(value: string): string[] {
  const ips = value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  for (const ip of ips) {
    if (isIP(ip) === 0)
      throw new ConfigError(
        'public-ip',
        `'${ip}' must be an IPv4 or IPv6 address, e.g. 203.0.113.7`,
      );
  }
  return ips;
}

function parseLogFormat(value: string): ServerConfig['logFormat'] {
  if (value !== 'auto' && value !== 'json' && value !== 'pretty') {
    throw new ConfigError('log-format', `'${value}' must be one of auto, json, pretty`);
  }
  return value;
}
