/**
 * What `burrow server` prints once its agent listener is up: the exact commands an agent runs, on
 * this machine and on another one, with the SHA-256 fingerprint of the server's CA so that a
 * remote agent can pin it on first contact instead of copying ca.pem around.
 */
import { join, relative, sep } from 'node:path';
import type { ServerConfig } from '../core/config.js';
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import type { Logger } from '../core/logger.js';
import { CERTS_DIR, findCertificateFile } from '../edge/certificates/certificates.js';
import type { Edge } from '../edge/edge.js';
import { certificateFingerprint } from '../sdk/index.js';
import { isLoopbackHost } from '../core/hostname.js';
import { DEFAULT_SERVER_ADDR } from './agent-config.js';
import { DEFAULT_DATA_DIR } from './ca-config.js';

/** What the hint is made of: where agents connect and what they trust there. */
export interface AgentHintInput {
  /** The agent listener's address as bound, e.g. `127.0.0.1:4443`, `0.0.0.0:4443`, `[::]:4443`. */
  agentAddress: string;
  /** The local CA's certificate (PEM) and where it is. */
  caPem: string;
  caPath: string;
  /** The folder the server was started in. */
  cwd: string;
  /** The file in `<data-dir>/certs/` that serves the agent listener instead of the local CA. */
  realCertificate: string | undefined;
}

/** The hint's lines, and the two commands for the structured log. */
export interface AgentHint {
  lines: string[];
  localCommand: string;
  remoteCommand: string;
  caFingerprint: string;
}

function splitAddress(address: string): { host: string; port: string } {
  const hp = parseHostPort(address, { allowEmptyHost: true });
  return { host: hp?.host ?? address, port: String(hp?.port ?? 4443) };
}

/** Said wherever `burrow` is to be installed elsewhere. */
const REGISTRY_WARNING = 'the package named burrow on the npm registry is another project';

/** A listener on every address (`0.0.0.0`, `::`, or no host). */
function isUnspecified(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

/**
 * The hint `burrow server` prints at start.
 * @example
 * const { lines } = agentConnectHint({ agentAddress: '127.0.0.1:4443', caPem, caPath: '/srv/burrow-data/ca.pem', cwd: '/srv', realCertificate: undefined });
 * for (const line of lines) process.stderr.write(`  ${line}\n`);
 */
export function agentConnectHint(input: AgentHintInput): AgentHint {
  const { host, port } = splitAddress(input.agentAddress);
  const unspecified = isUnspecified(host);
  const fingerprint = certificateFingerprint(input.caPem);

  const localAddress = formatHostPort(unspecified ? '127.0.0.1' : host, port);
  const inFolder = input.caPath === join(input.cwd, DEFAULT_DATA_DIR, 'ca.pem');
  const caShown = relative(input.cwd, input.caPath).startsWith(`..${sep}`)
    ? input.caPath
    : relative(input.cwd, input.caPath);
  const local = ['burrow http 3000'];
  if (localAddress !== DEFAULT_SERVER_ADDR) local.push(`--server ${localAddress}`);
  local.push('--authtoken <token>');
  if (!inFolder && !input.realCertificate) local.push(`--ca ${input.caPath}`);

  const remoteHost = unspecified ? '<this-host>' : host;
  const remote = [
    'burrow http 3000',
    `--server ${formatHostPort(remoteHost, port)}`,
    '--authtoken <token>',
  ];
  if (!input.realCertificate) remote.push(`--ca-fingerprint ${fingerprint}`);

  const lines = [
    input.realCertificate
      ? `Agents connect to ${input.agentAddress}, which serves ${input.realCertificate}.`
      : `Agents connect to ${input.agentAddress}; its certificate comes from the local CA ${caShown},`,
    ...(input.realCertificate ? [] : [`whose SHA-256 fingerprint is ${fingerprint}`]),
    `On this machine${inFolder ? ', in this folder' : ''}: ${local.join(' ')}`,
    `On another machine: ${remote.join(' ')}`,
    // `npx burrow` there would fetch the unrelated registry package of that name.
    `  (install it there with npm install -g <a clone or the npm pack tarball of this project>; ${REGISTRY_WARNING})`,
    'Create the <token> with POST /credentials (`burrow api-key create` makes the API key for it).',
  ];
  if (unspecified) {
    lines.push(
      `The certificate names only localhost, 127.0.0.1 and ::1: for agents elsewhere, start with --agent-listen <public name or address>:${port} so it names what they dial.`,
    );
  } else if (isLoopbackHost(host)) {
    lines.push(
      `${host} is loopback: for agents on other machines, start with --agent-listen <public name or address>:${port}.`,
    );
  }
  return {
    lines,
    localCommand: local.join(' '),
    remoteCommand: remote.join(' '),
    caFingerprint: fingerprint,
  };
}

/**
 * Print the hint to `out` (standard error: standard output carries the JSON log) and log it as
 * one structured line, `agents connect with`.
 * @example await announceAgentListener(server.edge, config, logger);
 */
export async function announceAgentListener(
  edge: Pick<Edge, 'agentAddress' | 'ca'>,
  config: Pick<ServerConfig, 'dataDir'>,
  logger: Logger,
  out: NodeJS.WritableStream = process.stderr,
  cwd: string = process.cwd(),
): Promise<void> {
  const { host } = splitAddress(edge.agentAddress);
  // The agent listener prefers a real certificate for its host, as agent-listener.ts picks it.
  const file = isUnspecified(host)
    ? undefined
    : await findCertificateFile(join(config.dataDir, CERTS_DIR), host);
  const hint = agentConnectHint({
    agentAddress: edge.agentAddress,
    caPem: edge.ca.certPem,
    caPath: edge.ca.certPath,
    cwd,
    realCertificate: file?.certPath,
  });
  logger.info(
    {
      agents: edge.agentAddress,
      ca_fingerprint: hint.caFingerprint,
      local: hint.localCommand,
      remote: hint.remoteCommand,
    },
    'agents connect with',
  );
  out.write(`\n${hint.lines.map((line) => `  ${line}`).join('\n')}\n\n`);
}
