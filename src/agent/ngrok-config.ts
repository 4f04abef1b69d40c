/**
 * ngrok's agent configuration file (`ngrok.yml`), version 2 and version 3, read as Burrow's agent
 * honours it: the session settings (`authtoken`, `server_addr` / `connect_url`, `root_cas` /
 * `connect_cas`, `web_addr`, `metadata`) and every tunnel (version 2 `tunnels:`) or endpoint
 * (version 3 `endpoints:`) as a {@link TunnelDefinition}. Several files merge as ngrok merges
 * them: later files win key by key, tunnels and endpoints by name.
 *
 * Nothing is dropped in silence: a key Burrow does not know, or knows and cannot honour, is a
 * {@link NgrokConfigError} naming the file, the line and the key; the few keys that mean nothing
 * to a self-hosted edge (`region`, `console_ui`, `update_check`, …) are listed in `ignored` so
 * the CLI can say so.
 */
import { readFileSync } from 'node:fs';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';
import { BurrowError, CODES, NO_HTTP_STATUS } from '../core/errors.js';
import { ngrokCaFile, ngrokServerAddr } from './ngrok-agent-keys.js';
import {
  definitionFromEndpoint,
  definitionFromTunnel,
  type TunnelDefinition,
} from './tunnel-definition.js';

/** A key of an ngrok.yml that is wrong, unknown or not honoured; its message names file, line and key. */
export class NgrokConfigError extends BurrowError {
  constructor(message: string) {
    super(CODES.invalidConfig, NO_HTTP_STATUS, message);
  }
}

/** One configuration file, parsed, with the line of each key path (`tunnels.web.addr`). */
export interface ConfigSource {
  path: string;
  value: Record<string, unknown>;
  lines: Map<string, number>;
}

/** The agent settings of the merged files. */
export interface NgrokAgentConfig {
  /** The highest `version` of the files: 2 or 3. */
  version: 2 | 3;
  authtoken: string | undefined;
  /** `server_addr` (v2) or `connect_url` (v3): the edge's agent listener. */
  serverAddr: string | undefined;
  /** A CA file from `root_cas` / `connect_cas` (`host` means the system roots only: undefined). */
  caFile: string | undefined;
  /** `web_addr`: an address, `false` (off), or undefined (the default 127.0.0.1:4040). */
  webAddr: string | false | undefined;
  /** `inspect_db_size` in bytes (how much the inspector keeps), when given. */
  inspectDbSize: number | undefined;
  /** The session's metadata. */
  metadata: string | undefined;
  /** Burrow's own keys, as the agent config file writes them (`ca_certs`, `ca_fingerprint`). */
  caCerts: string[] | undefined;
  caFingerprint: string | undefined;
  /** Tunnels and endpoints by name, in file order. */
  tunnels: TunnelDefinition[];
  /** Keys read and ignored because they mean nothing to a self-hosted edge, with where. */
  ignored: string[];
}

/** Keys that mean nothing for Burrow's agent: accepted, reported in `ignored`. */
const IGNORED_AGENT_KEYS = new Set([
  'region',
  'console_ui',
  'console_ui_color',
  'log',
  'log_level',
  'log_format',
  'update_channel',
  'update_check',
  'remote_management',
  'web_allow_hosts',
  // For `ngrok api …`; Burrow's API is reached with `burrow endpoint` and the server's API keys.
  'api_key',
]);

/** Agent keys Burrow knows and cannot honour, with what to do instead. */
const UNSUPPORTED_AGENT_KEYS: Record<string, string> = {
  proxy_url: 'Burrow agents do not dial through an outbound proxy yet',
  connect_interface: 'Burrow agents cannot pick the outbound interface',
  dns_resolver_ips: "Burrow agents use the system's resolver",
  heartbeat_interval: 'the heartbeat is fixed by the SDK (docs/protocol.md)',
  heartbeat_tolerance: 'the heartbeat is fixed by the SDK (docs/protocol.md)',
  crl_noverify: 'Burrow agents do not fetch CRLs',
  connect_timeout: 'the connect timeout is fixed by the SDK',
  tls_timeout: 'the TLS timeout is fixed by the SDK',
};

const V2_KEYS = new Set([
  'version',
  'authtoken',
  'server_addr',
  'root_cas',
  'web_addr',
  'inspect_db_size',
  'metadata',
  'tunnels',
  // Burrow's agent config file (`burrow config add-authtoken`) writes these.
  'ca',
  'ca_certs',
  'ca_fingerprint',
]);
const V3_TOP_KEYS = new Set(['version', 'agent', 'endpoints', 'tunnels']);
const V3_AGENT_KEYS = new Set([
  'authtoken',
  'connect_url',
  'connect_cas',
  'web_addr',
  'inspect_db_size',
  'metadata',
  'ca',
  'ca_certs',
  'ca_fingerprint',
]);

/** Record the line of every key path of `node` (a mapping's keys, a sequence's items by index). */
function collectLines(
  node: unknown,
  prefix: string,
  lc: LineCounter,
  out: Map<string, number>,
): void {
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isPair(pair) || !isScalar(pair.key)) continue;
      const path = prefix === '' ? String(pair.key.value) : `${prefix}.${String(pair.key.value)}`;
      const start = (pair.key as Node).range?.[0];
      if (start !== undefined) out.set(path, lc.linePos(start).line);
      collectLines(pair.value, path, lc, out);
    }
  } else if (isSeq(node)) {
    node.items.forEach((item, index) => {
      const path = `${prefix}[${index}]`;
      const start = (item as Node | null)?.range?.[0];
      if (start !== undefined) out.set(path, lc.linePos(start).line);
      collectLines(item, path, lc, out);
    });
  }
}

/**
 * Parse one file's text; `path` names it in errors.
 * @example parseConfigText('version: 2\nauthtoken: x\n', 'ngrok.yml').value // { version: 2, authtoken: 'x' }
 */
export function parseConfigText(text: string, path: string): ConfigSource {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  const firstError = doc.errors[0];
  if (firstError) {
    const line = firstError.linePos?.[0]?.line;
    throw new NgrokConfigError(
      `${path}${line ? `:${line}` : ''}: not valid YAML: ${firstError.message.split('\n')[0]}`,
    );
  }
  const value = doc.toJS() as unknown;
  if (value === null || value === undefined) return { path, value: {}, lines: new Map() };
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new NgrokConfigError(`${path}: must hold a YAML mapping (key: value lines)`);
  }
  const lines = new Map<string, number>();
  collectLines(doc.contents, '', lineCounter, lines);
  return { path, value: value as Record<string, unknown>, lines };
}

/**
 * Read one file; a missing file is an error that names it.
 * @example readConfigSource('/home/me/.config/ngrok/ngrok.yml')
 */
export function readConfigSource(path: string): ConfigSource {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new NgrokConfigError(`cannot read the config file ${path}: ${(err as Error).message}`);
  }
  return parseConfigText(text, path);
}

/** Where a key is, for messages: `ngrok.yml:12 (tunnels.web.crt)`. */
export function where(source: ConfigSource, key: string): string {
  const line = source.lines.get(key);
  return `${source.path}${line === undefined ? '' : `:${line}`} (${key})`;
}

function versionOf(source: ConfigSource): 2 | 3 {
  const raw = source.value.version;
  if (raw === undefined)
    return source.value.agent !== undefined || source.value.endpoints !== undefined ? 3 : 2;
  const text = typeof raw === 'string' || typeof raw === 'number' ? String(raw).trim() : '';
  if (text === '2' || text === '3') return Number(text) as 2 | 3;
  throw new NgrokConfigError(
    `${where(source, 'version')}: version must be 2 or 3, not ${JSON.stringify(raw)}`,
  );
}

function optionalString(source: ConfigSource, key: string, value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string')
    throw new NgrokConfigError(`${where(source, key)}: must be a string`);
  return value;
}

/** `root_cas` / `connect_cas`: `host` (the system roots), or a PEM file. */
function caFileOf(source: ConfigSource, key: string, value: unknown): string | undefined {
  const text = optionalString(source, key, value);
  if (text === undefined) return undefined;
  return ngrokCaFile(text, (message) => new NgrokConfigError(`${where(source, key)}: ${message}`));
}

function webAddrOf(source: ConfigSource, key: string, value: unknown): string | false | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === false || value === 'false') return false;
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  throw new NgrokConfigError(`${where(source, key)}: must be host:port or false`);
}

function sizeOf(source: ConfigSource, key: string, value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    throw new NgrokConfigError(`${where(source, key)}: must be a whole number of bytes`);
  }
  return n;
}

function checkAgentKeys(
  source: ConfigSource,
  prefix: string,
  keys: Iterable<string>,
  known: Set<string>,
  ignored: string[],
): void {
  for (const key of keys) {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    if (known.has(key)) continue;
    if (IGNORED_AGENT_KEYS.has(key)) {
      ignored.push(where(source, path));
      continue;
    }
    const why = UNSUPPORTED_AGENT_KEYS[key];
    throw new NgrokConfigError(
      why
        ? `${where(source, path)}: ${key} is not supported: ${why}`
        : `${where(source, path)}: unknown key ${key}`,
    );
  }
}

function asMapping(source: ConfigSource, key: string, value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new NgrokConfigError(`${where(source, key)}: must be a mapping`);
  }
  return value as Record<string, unknown>;
}

/** The settings and tunnels of one file, before merging. */
function readSource(
  source: ConfigSource,
  into: NgrokAgentConfig,
  byName: Map<string, TunnelDefinition>,
): void {
  const version = versionOf(source);
  if (version > into.version) into.version = version;
  const top = source.value;
  let agent: Record<string, unknown>;
  let prefix: string;
  if (version === 2) {
    checkAgentKeys(source, '', Object.keys(top), V2_KEYS, into.ignored);
    agent = top;
    prefix = '';
  } else {
    for (const key of Object.keys(top)) {
      if (!V3_TOP_KEYS.has(key)) {
        const hint =
          V2_KEYS.has(key) || IGNORED_AGENT_KEYS.has(key)
            ? ` (in version 3 it goes under agent:)`
            : '';
        throw new NgrokConfigError(`${where(source, key)}: unknown key ${key}${hint}`);
      }
    }
    agent = asMapping(source, 'agent', top.agent);
    prefix = 'agent.';
    checkAgentKeys(source, 'agent', Object.keys(agent), V3_AGENT_KEYS, into.ignored);
  }
  const k = (key: string): string => `${prefix}${key}`;
  const str = (key: string): string | undefined => optionalString(source, k(key), agent[key]);
  into.authtoken = str('authtoken') ?? into.authtoken;
  const server = version === 2 ? str('server_addr') : str('connect_url');
  into.serverAddr = (server && ngrokServerAddr(server)) ?? into.serverAddr;
  const casKey = version === 2 ? 'root_cas' : 'connect_cas';
  if (agent[casKey] !== undefined) into.caFile = caFileOf(source, k(casKey), agent[casKey]);
  into.caFile = str('ca') ?? into.caFile;
  into.caFingerprint = str('ca_fingerprint') ?? into.caFingerprint;
  const certs = agent.ca_certs;
  if (certs !== undefined) {
    const list = typeof certs === 'string' ? [certs] : certs;
    if (!Array.isArray(list) || list.some((c) => typeof c !== 'string')) {
      throw new NgrokConfigError(
        `${where(source, k('ca_certs'))}: must be a list of PEM certificates`,
      );
    }
    into.caCerts = list as string[];
  }
  into.webAddr = webAddrOf(source, k('web_addr'), agent.web_addr) ?? into.webAddr;
  into.inspectDbSize =
    sizeOf(source, k('inspect_db_size'), agent.inspect_db_size) ?? into.inspectDbSize;
  into.metadata = str('metadata') ?? into.metadata;

  const tunnels = asMapping(source, 'tunnels', top.tunnels);
  for (const [name, value] of Object.entries(tunnels)) {
    const at = `tunnels.${name}`;
    const fail = (key: string, message: string): Error =>
      new NgrokConfigError(`${where(source, key === '' ? at : `${at}.${key}`)}: ${message}`);
    byName.set(name, definitionFromTunnel(name, asMapping(source, at, value), fail));
  }
  if (top.endpoints !== undefined) {
    if (version !== 3) {
      throw new NgrokConfigError(`${where(source, 'endpoints')}: endpoints: needs version: 3`);
    }
    if (!Array.isArray(top.endpoints)) {
      throw new NgrokConfigError(`${where(source, 'endpoints')}: must be a list of endpoints`);
    }
    top.endpoints.forEach((value: unknown, index: number) => {
      const at = `endpoints[${index}]`;
      const fields = asMapping(source, at, value);
      const fail = (key: string, message: string): Error =>
        new NgrokConfigError(`${where(source, key === '' ? at : `${at}.${key}`)}: ${message}`);
      const definition = definitionFromEndpoint(fields, index, fail);
      byName.set(definition.name, definition);
    });
  }
}

/**
 * Merge `sources` in order (later files win key by key, tunnels and endpoints by name).
 * @example mergeConfigSources([readConfigSource('ngrok.yml')]).tunnels.map((t) => t.name)
 */
export function mergeConfigSources(sources: readonly ConfigSource[]): NgrokAgentConfig {
  const config: NgrokAgentConfig = {
    version: 2,
    authtoken: undefined,
    serverAddr: undefined,
    caFile: undefined,
    webAddr: undefined,
    inspectDbSize: undefined,
    metadata: undefined,
    caCerts: undefined,
    caFingerprint: undefined,
    tunnels: [],
    ignored: [],
  };
  const byName = new Map<string, TunnelDefinition>();
  for (const source of sources) readSource(source, config, byName);
  config.tunnels = [...byName.values()];
  return config;
}
