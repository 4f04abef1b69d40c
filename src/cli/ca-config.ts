/**
 * How the agent commands (`burrow http|tcp|tls`, `burrow agent`) come to trust the server on first
 * contact: the CA of a server whose data folder is right here (`./burrow-data/ca.pem`), CAs stored
 * with `burrow config add-ca <file|url>`, and a pinned fingerprint. All of them are added to the
 * system roots, so a publicly trusted agent-listener certificate needs none of this.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Command } from 'commander';
import { X509Certificate } from 'node:crypto';
import { certificateFingerprint, parseCaFingerprint } from '../sdk/index.js';
import { splitPemCertificates } from '../sdk/trust.js';
import {
  agentConfigPath,
  readAgentConfig,
  writeAgentConfig,
  type TunnelSettings,
} from './agent-config.js';

/** The data folder `burrow server` uses by default, relative to the folder it was started in. */
export const DEFAULT_DATA_DIR = 'burrow-data';

/**
 * `./burrow-data/ca.pem` under `cwd` when it exists: the CA of a server started in this folder
 * with the default data folder.
 * @example localServerCa('/home/me') // '/home/me/burrow-data/ca.pem' or undefined
 */
export function localServerCa(cwd: string = process.cwd()): string | undefined {
  const path = join(cwd, DEFAULT_DATA_DIR, 'ca.pem');
  return existsSync(path) ? path : undefined;
}

/** What connect() trusts, from the resolved settings. */
export interface TrustOptions {
  /** CA files and PEM texts, added to the system roots. */
  ca: string[] | undefined;
  caFingerprint: string | undefined;
}

/**
 * The `ca` and `caFingerprint` of connect(): the CA file of `--ca` (or BURROW_CA, or the config
 * file's `ca`), else the server's CA in `./burrow-data/` when there is one (said in one line to
 * `say`), plus the CAs stored with `burrow config add-ca`.
 * @example const trust = trustOptions(settings, (line) => process.stderr.write(`${line}\n`));
 */
export function trustOptions(
  settings: TunnelSettings,
  say: (line: string) => void,
  cwd: string = process.cwd(),
): TrustOptions {
  const ca: string[] = [];
  if (settings.ca !== undefined) ca.push(settings.ca);
  else {
    const local = localServerCa(cwd);
    if (local !== undefined) {
      ca.push(local);
      say(
        `burrow: trusting the CA of the server in this folder, ./${relative(cwd, local)} (--ca <file> to use another)`,
      );
    }
  }
  ca.push(...(settings.caCerts ?? []));
  return { ca: ca.length > 0 ? ca : undefined, caFingerprint: settings.caFingerprint };
}

/**
 * Why fetch() failed: its cause's message (`connect ECONNREFUSED 127.0.0.1:4000`) rather than
 * undici's bare `fetch failed`.
 * @example fetchFailure(err) // 'getaddrinfo ENOTFOUND edge.example.com'
 */
export function fetchFailure(err: unknown): string {
  return (err as { cause?: { message?: string } }).cause?.message ?? (err as Error).message;
}

/** A CA read for `add-ca`: its certificates and where they came from. */
export interface FetchedCa {
  pems: string[];
  /** True when it came over plain HTTP, where anyone in between could have replaced it. */
  unauthenticated: boolean;
}

/**
 * Read the PEM certificates of a file, or of an `http(s)://` URL (10 s limit); throws an Error
 * that names the source and what was wrong.
 * @example const { pems } = await readCaSource('http://edge.example.com:4000/ca.pem');
 */
export async function readCaSource(source: string): Promise<FetchedCa> {
  let text: string;
  const url = /^https?:\/\//i.test(source);
  if (url) {
    let res: Response;
    try {
      res = await fetch(source, { signal: AbortSignal.timeout(10_000), redirect: 'follow' });
    } catch (err) {
      throw new Error(
        `cannot fetch ${source}: ${fetchFailure(err)}. Copy the server's <data-dir>/ca.pem here and give its path instead.`,
      );
    }
    if (!res.ok) throw new Error(`cannot fetch ${source}: HTTP ${res.status} ${res.statusText}`);
    text = await res.text();
  } else {
    try {
      text = await readFile(source, 'utf8');
    } catch (err) {
      throw new Error(`cannot read the CA file ${source}: ${(err as Error).message}`);
    }
  }
  const pems = splitPemCertificates(text);
  for (const pem of pems) {
    try {
      new X509Certificate(pem);
    } catch (err) {
      throw new Error(
        `${source} holds a certificate that cannot be read: ${(err as Error).message}`,
      );
    }
  }
  if (pems.length === 0) {
    throw new Error(
      `${source} holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the server's <data-dir>/ca.pem`,
    );
  }
  return { pems, unauthenticated: url && source.toLowerCase().startsWith('http:') };
}

function describe(pem: string): string {
  const subject = new X509Certificate(pem).subject;
  const cn = /^CN=(.*)$/m.exec(subject)?.[1] ?? subject.replace(/\n/g, ', ');
  return `"${cn}" ${certificateFingerprint(pem)}`;
}

/**
 * Add the certificates of `source` (a file or an http(s) URL) to the `ca_certs` of the agent
 * config file (mode 0600), skipping those already there. With `fingerprint`, they are stored only
 * if one of them has it. Returns the lines to print.
 * @example const lines = await addCa(agentConfigPath(), './ca.pem', undefined);
 */
export async function addCa(
  configPath: string,
  source: string,
  fingerprint: string | undefined,
): Promise<{ out: string[]; err: string[] }> {
  const pin = fingerprint === undefined ? undefined : parseCaFingerprint(fingerprint);
  const { pems, unauthenticated } = await readCaSource(source);
  const fingerprints = pems.map((pem) => new X509Certificate(pem).fingerprint256);
  if (pin !== undefined && !fingerprints.includes(pin)) {
    throw new Error(
      `${source} holds ${pems.map(describe).join(', ')}, not the certificate sha256:${pin}: nothing was stored. ` +
        'Check the fingerprint `burrow server` printed at start, and where this file comes from.',
    );
  }
  const stored = readAgentConfig(configPath).ca_certs ?? [];
  const known = new Set(stored.map((pem) => new X509Certificate(pem).fingerprint256));
  const added = pems.filter((_pem, i) => !known.has(fingerprints[i]!));
  if (added.length > 0) {
    writeAgentConfig(configPath, { ca_certs: [...stored, ...added.map((p) => `${p.trim()}\n`)] });
  }
  const out = pems.map(
    (pem) =>
      `${added.includes(pem) ? 'Added' : 'Already trusted:'} CA ${describe(pem)} (${configPath})`,
  );
  const err =
    unauthenticated && pin === undefined
      ? [
          `burrow: ${source} came over plain HTTP, so anyone in between could have replaced it: compare the fingerprint above with the one \`burrow server\` printed at start (or pass --ca-fingerprint to have it checked).`,
        ]
      : [];
  return { out, err };
}

/**
 * Register `burrow config add-ca <file|url>` on the `config` command.
 * @example registerAddCa(program.command('config'));
 */
export function registerAddCa(config: Command): void {
  config
    .command('add-ca')
    .description(
      "trust a server's CA (its <data-dir>/ca.pem, as a file or an http(s) URL) in burrow http|tcp|tls and burrow agent, on top of the system roots",
    )
    .argument('<file|url>', 'a PEM file, or an http(s) URL that serves one')
    .option('--ca-fingerprint <sha256>', 'store it only if it has this SHA-256 fingerprint')
    .option('--config <file>', 'agent config file (default: ~/.config/burrow/config.yaml)')
    .action(async (source: string, flags: { caFingerprint?: string; config?: string }) => {
      const path = flags.config ?? agentConfigPath();
      const { out, err } = await addCa(path, source, flags.caFingerprint);
      for (const line of out) process.stdout.write(`${line}\n`);
      for (const line of err) process.stderr.write(`${line}\n`);
    });
}
