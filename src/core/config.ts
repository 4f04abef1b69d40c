/**
 * Loading the server configuration: each option's text from its flag, environment variable,
 * config file (YAML or JSON) or default, checked and turned into one ServerConfig; a value that
 * cannot be used is a ConfigError naming the option and the rule.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseAcmeConfig, type AcmeConfig } from './acme-config.js';
import { parseEgressAllow, type EgressAllowEntry } from './egress-guard.js';
import { parseDashboardOidc, type DashboardOidcConfig } from './dashboard-oidc-options.js';
import {
  parseGeoipFiles,
  parseOAuthApps,
  type GeoipFiles,
  type OAuthApp,
} from './policy-data-options.js';
import { BurrowError, CODES, NO_HTTP_STATUS } from './errors.js';
import { parseHostPort } from './host-port.js';
import { hostnameProblem, normalizeName } from './hostname.js';
import { parseLimits, type ServerLimits } from './limits.js';
import { parseClusterConfig, type ClusterConfig } from './cluster-config.js';
import { envName, SERVER_OPTIONS } from './server-options.js';

/**
 * Server configuration. Every option has a flag (`--api-listen`), an environment variable
 * (`BURROW_API_LISTEN`) and a config-file key (`api-listen`); precedence is flag, then environment,
 * then file, then default. The options are listed in server-options.ts; the ACME ones are
 * AcmeConfig's (acme-config.ts).
 */
export interface ServerConfig extends AcmeConfig {
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
  /** The name agents dial: in the agent listener's certificate, and ordered by ACME when on. */
  agentHostname: string;
  /** Authoritative DNS (UDP and TCP) host:port; empty: no DNS server. */
  dnsListen: string;
  /** SSH tunnels' listener host:port (`ssh -R`, docs/ssh.md); empty: none. */
  sshListen: string;
  /** Addresses the DNS server answers for the base domain and every name under it. */
  publicIp: string[];
  /** Limits of every listener (limits.ts; one table in docs/security.md). */
  limits: ServerLimits;
  /** This process as a node of a cluster on PostgreSQL (cluster-config.ts). */
  cluster: ClusterConfig;
  /** `auto`: coloured lines on a terminal, JSON otherwise; `json` or `pretty` force one. */
  logFormat: 'auto' | 'json' | 'pretty';
  /** Lower-case header names the traffic inspector redacts besides the credential headers. */
  inspectRedactHeaders: string[];
  /** What traffic policies may make the edge fetch though it is internal (core/egress-guard.ts). */
  egressAllow: EgressAllowEntry[];
  /** MaxMind-format files of traffic policies' IP intelligence (policy-data-options.ts). */
  geoip: GeoipFiles;
  /** The operator's OAuth apps by provider (policy-data-options.ts). */
  oauthApps: Record<string, OAuthApp>;
  /** Dashboard sign-in with OpenID Connect (dashboard-oidc-options.ts); undefined: off. */
  dashboardOidc: DashboardOidcConfig | undefined;
}

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

/** How the parsers of acme-config.ts, limits.ts and cluster-config.ts fail: a ConfigError. */
const configError = (option: string, rule: string): ConfigError => new ConfigError(option, rule);

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
  // A bare port listens on loopback: exposing SSH to the network is a choice made by address.
  const sshListen = get('sshListen').replace(/^(\d+)$/, '127.0.0.1:$1');
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
    ...parseAcmeConfig(get, configError),
    agentHostname: parseAgentHostname(get('agentHostname')),
    dnsListen: dnsListen ? parseListen('dns-listen', dnsListen) : '',
    sshListen: sshListen ? parseListen('ssh-listen', sshListen) : '',
    publicIp: parsePublicIps(get('publicIp')),
    limits: parseLimits(raw, configError),
    cluster: parseClusterConfig(raw, configError),
    logFormat: parseLogFormat(get('logFormat')),
    inspectRedactHeaders: parseHeaderNames('inspect-redact-header', get('inspectRedactHeaders')),
    egressAllow: parseEgressAllowList(get('egressAllow')),
    geoip: parseGeoipFiles(raw),
    oauthApps: parseOAuthApps(raw, configError),
    dashboardOidc: parseDashboardOidc(raw, configError),
  };
}

/** Comma-separated `--egress-allow` entries: blocks, addresses, host names. */
function parseEgressAllowList(value: string): EgressAllowEntry[] {
  return value
    .split(',')
    .filter((v) => v.trim() !== '')
    .map((text) => {
      const entry = parseEgressAllow(text);
      if ('problem' in entry) throw new ConfigError('egress-allow', entry.problem);
      return entry;
    });
}

/** Comma-separated header names (RFC 9110 tokens), lower-cased. */
function parseHeaderNames(option: string, value: string): string[] {
  const names = value
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '');
  for (const name of names) {
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name))
      throw new ConfigError(
        option,
        `'${name}' must be a header name: letters, digits and !#$%&'*+.^_\`|~-, e.g. x-api-key`,
      );
  }
  return names;
}

function parseAgentHostname(value: string): string {
  const name = normalizeName(value);
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
