/**
 * The agent config file of the CLI quick tunnels and the device agent: the server, authtoken and
 * CAs of the user, so `burrow http 3000` works without flags. It lives in the user's config folder, readable by the
 * user alone because it holds a secret.
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ngrokCaFile, ngrokServerAddr } from '../agent/ngrok-agent-keys.js';

/** What the config file holds (other keys are kept as they are). */
export interface AgentConfig {
  /** The edge's agent listener, host:port. */
  server_addr?: string;
  authtoken?: string;
  /** Absolute path of the CA file that signed the agent listener's certificate. */
  ca?: string;
  /** CA certificates (PEM) stored with `burrow config add-ca`, trusted on top of `ca`. */
  ca_certs?: string[];
  /** The pinned SHA-256 fingerprint of the server's CA (`sha256:AB:…`). */
  ca_fingerprint?: string;
  /** ngrok's `web_addr`: the agent API's address, or false (off). Not written by Burrow. */
  web_addr?: string | false;
}

/** The agent listener of a `burrow server` with default flags. */
export const DEFAULT_SERVER_ADDR = '127.0.0.1:4443';

/**
 * `$XDG_CONFIG_HOME/burrow/config.yaml`, else `~/.config/burrow/config.yaml`.
 * @example agentConfigPath({ XDG_CONFIG_HOME: '/tmp/cfg' }) // '/tmp/cfg/burrow/config.yaml'
 */
export function agentConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'burrow', 'config.yaml');
}

function readRaw(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new Error(`cannot read the config file ${path}: ${(err as Error).message}`);
  }
  const parsed = parseYaml(text) as unknown;
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`the config file ${path} must hold a YAML mapping (key: value lines)`);
  }
  return parsed as Record<string, unknown>;
}

/**
 * The config file's settings; an absent file is an empty config.
 * @example const { authtoken } = readAgentConfig(agentConfigPath());
 */
export function readAgentConfig(path: string): AgentConfig {
  const top = readRaw(path);
  // An ngrok.yml of version 3 keeps these under `agent:`, with connect_url for server_addr.
  const agent = top.agent;
  const raw =
    agent !== null && typeof agent === 'object' && !Array.isArray(agent)
      ? { ...top, ...(agent as Record<string, unknown>) }
      : top;
  if (raw.server_addr === undefined) raw.server_addr = raw.connect_url;
  if (typeof raw.server_addr === 'string') raw.server_addr = ngrokServerAddr(raw.server_addr);
  // ngrok's root_cas / connect_cas: a CA file ('host' is the system roots, which are trusted anyway).
  const casKey = raw.root_cas !== undefined ? 'root_cas' : 'connect_cas';
  const cas = raw[casKey];
  if (raw.ca === undefined && typeof cas === 'string') {
    raw.ca = ngrokCaFile(
      cas,
      (message) => new Error(`the config file ${path}: ${casKey}: ${message}`),
    );
  }
  const webAddr = raw.web_addr;
  const text = (key: string): string | undefined =>
    typeof raw[key] === 'string' && raw[key] !== '' ? raw[key] : undefined;
  const certs = typeof raw.ca_certs === 'string' ? [raw.ca_certs] : raw.ca_certs;
  const caCerts = Array.isArray(certs)
    ? certs.filter((c): c is string => typeof c === 'string' && c !== '')
    : [];
  return {
    server_addr: text('server_addr'),
    authtoken: text('authtoken'),
    ca: text('ca'),
    ca_certs: caCerts.length > 0 ? caCerts : undefined,
    ca_fingerprint: text('ca_fingerprint'),
    web_addr:
      webAddr === false || webAddr === 'false'
        ? false
        : typeof webAddr === 'string' || typeof webAddr === 'number'
          ? String(webAddr)
          : undefined,
  };
}

/**
 * Merge `changes` into the config file and write it atomically with mode 0600 (its folder 0700).
 * A relative CA path is stored as an absolute one, so the file works from any folder.
 * @example writeAgentConfig(agentConfigPath(), { authtoken: 'tok', server_addr: 'edge.example.com:4443' });
 */
export function writeAgentConfig(path: string, changes: AgentConfig): void {
  const raw = readRaw(path);
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) continue;
    raw[key] = key === 'ca' ? resolve(value as string) : value;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, stringifyYaml(raw), { mode: 0o600 });
  // The mode given to writeFileSync is masked by the umask; the secret must not be readable by others.
  chmodSync(temp, 0o600);
  renameSync(temp, path);
}

/** The settings a tunnel command runs with. */
export interface TunnelSettings {
  serverAddr: string;
  authtoken: string | undefined;
  /** The CA file of `--ca`, BURROW_CA or the config file's `ca`. */
  ca: string | undefined;
  /** CAs stored with `burrow config add-ca` (PEM), trusted too. */
  caCerts: string[] | undefined;
  /** `--ca-fingerprint`, BURROW_CA_FINGERPRINT or the config file's `ca_fingerprint`. */
  caFingerprint: string | undefined;
  /** The config file's `web_addr` (flags and environment are read where the API starts). */
  webAddr: string | false | undefined;
}

/**
 * Settings by precedence: flags, then environment (`BURROW_AUTHTOKEN`, `BURROW_SERVER_ADDR`,
 * `BURROW_CA`, `BURROW_CA_FINGERPRINT`), then the config file, then the default server. The CAs
 * of `burrow config add-ca` are always kept (they add trust, they do not replace a `--ca`).
 * @example resolveTunnelSettings({ server: undefined, authtoken: 'x' }, process.env, readAgentConfig(path))
 */
export function resolveTunnelSettings(
  flags: {
    server?: string | undefined;
    authtoken?: string | undefined;
    ca?: string | undefined;
    caFingerprint?: string | undefined;
  },
  env: NodeJS.ProcessEnv,
  file: AgentConfig,
): TunnelSettings {
  const pick = (...values: Array<string | undefined>): string | undefined =>
    values.find((v) => v !== undefined && v !== '');
  return {
    serverAddr: pick(flags.server, env.BURROW_SERVER_ADDR, file.server_addr) ?? DEFAULT_SERVER_ADDR,
    authtoken: pick(flags.authtoken, env.BURROW_AUTHTOKEN, file.authtoken),
    ca: pick(flags.ca, env.BURROW_CA, file.ca),
    caCerts: file.ca_certs,
    caFingerprint: pick(flags.caFingerprint, env.BURROW_CA_FINGERPRINT, file.ca_fingerprint),
    webAddr: file.web_addr,
  };
}

/**
 * Add the options of every command that connects to the edge as an agent; their values go to
 * {@link resolveTunnelSettings}.
 * @example addConnectionOptions(program.command('tcp')).action(...)
 */
export function addConnectionOptions(command: Command): Command {
  return command
    .option(
      '--server <host:port>',
      `the edge agent listener [env BURROW_SERVER_ADDR] (default: config file, else ${DEFAULT_SERVER_ADDR})`,
    )
    .option('--authtoken <token>', 'authtoken [env BURROW_AUTHTOKEN] (default: config file)')
    .option(
      '--ca <file>',
      "the server's CA certificate, <data-dir>/ca.pem, trusted on top of the system roots [env BURROW_CA] (default: ./burrow-data/ca.pem when it exists)",
    )
    .option(
      '--ca-fingerprint <sha256>',
      "pin the server's CA by the SHA-256 fingerprint `burrow server` prints (sha256:AB:CD:…) [env BURROW_CA_FINGERPRINT]",
    )
    .option('--config <file>', 'agent config file (default: ~/.config/burrow/config.yaml)');
}
