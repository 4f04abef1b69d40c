/**
 * The CLI quick tunnels: `burrow http 3000`, `burrow tcp 22`, `burrow tls 443`, and
 * `burrow config add-authtoken` / `add-ca` to store the server, token and CA once.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { splitLabel } from '../core/labels.js';
import { logClock, requestLogLine } from '../core/request-log-line.js';
import {
  CLI_HINTS,
  connect,
  describeConnectError,
  parseCaFingerprint,
  parseLocalAddress,
  type Endpoint,
  type Session,
} from '../sdk/index.js';
import {
  addConnectionOptions,
  agentConfigPath,
  readAgentConfig,
  resolveTunnelSettings,
  writeAgentConfig,
} from './agent-config.js';
import { registerAddCa, trustOptions } from './ca-config.js';
import { registerConfigFileCommands } from './config-commands.js';
import { addWebOptions } from './agent-web-options.js';
import { describeCommand } from './command-index.js';
import {
  addEndpointFlags,
  endpointTrafficPolicy,
  hostHeaderRewrite,
  type EndpointFlags,
  type TunnelProto,
} from './endpoint-flags.js';

interface AddAuthtokenFlags {
  server?: string;
  ca?: string;
  caFingerprint?: string;
  config?: string;
}

interface TunnelFlags extends EndpointFlags {
  /** `--label key=value`, repeatable: a labeled tunnel that edges route to, instead of an endpoint. */
  label?: string[];
  /** `--app-protocol http2` (http): the service speaks HTTP/2 without TLS (gRPC, h2c). */
  appProtocol?: string;
  domain?: string;
  addr?: string;
  policyFile?: string;
  server?: string;
  authtoken?: string;
  ca?: string;
  caFingerprint?: string;
  config?: string;
  /** `--web-addr` and `--web-auth`: the agent API and inspector (src/cli/agent-web.ts). */
  webAddr?: string;
  webAuth?: string;
}

/** Where the command writes: the URL and request log to `out`, status changes to `err`. */
export interface TunnelIo {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
}

/**
 * What the `Forwarding` line names: the endpoint's URL, or a labeled tunnel's labels.
 * @example forwardingFrom(endpoint) // 'https://k3j9x0a1b2.burrow.localhost:8443', or 'labels app=ssh,site=a'
 */
export function forwardingFrom(endpoint: Endpoint): string {
  if (endpoint.url !== undefined) return endpoint.url;
  const labels = Object.entries(endpoint.labels ?? {}).map(([k, v]) => `${k}=${v}`);
  return `labels ${labels.join(',')}`;
}

function describeError(err: unknown): string {
  return describeConnectError(err, CLI_HINTS);
}

function readPolicyFile(path: string | undefined): { path: string; text: string } | undefined {
  if (path === undefined) return undefined;
  try {
    return { path, text: readFileSync(path, 'utf8') };
  } catch (err) {
    throw new Error(`cannot read the policy file ${path}: ${(err as Error).message}`);
  }
}

/**
 * The labels of `--label key=value` flags, or undefined without any. A labeled tunnel has no
 * address or policy of its own (the edge that routes to it has them), so the flags that give an
 * endpoint those are refused with it.
 * @example tunnelLabels({ label: ['app=ssh', 'site=a'] }, undefined) // { app: 'ssh', site: 'a' }
 */
export function tunnelLabels(
  flags: TunnelFlags,
  trafficPolicy: string | undefined,
): Record<string, string> | undefined {
  if (flags.label === undefined || flags.label.length === 0) return undefined;
  const labels: Record<string, string> = {};
  for (const flag of flags.label) {
    const pair = splitLabel(flag);
    if (!pair) {
      throw new Error(
        `--label ${JSON.stringify(flag)}: a label is key=value, e.g. --label app=ssh`,
      );
    }
    labels[pair[0]] = pair[1];
  }
  const endpointOnly = [
    flags.domain !== undefined && '--domain',
    flags.addr !== undefined && '--addr',
    flags.hostHeader !== undefined && '--host-header',
    trafficPolicy !== undefined && 'the endpoint flags and --policy-file',
  ].filter((f): f is string => f !== false);
  if (endpointOnly.length > 0) {
    throw new Error(
      `--label starts a labeled tunnel, which has no address or traffic policy of its own (the edge that routes to it has them): drop ${endpointOnly.join(', ')}, or drop --label for an endpoint`,
    );
  }
  return labels;
}

/**
 * `--app-protocol`: `http1` (the default) or `http2`, as ngrok's agent takes it.
 * @example appProtocolFlag('http2') // 'http2'
 */
export function appProtocolFlag(value: string | undefined): 'http1' | 'http2' | undefined {
  if (value === undefined || value === 'http1' || value === 'http2') return value;
  throw new Error(
    `--app-protocol ${JSON.stringify(value)}: give http1 or http2 (http2 for a service that speaks HTTP/2 without TLS, such as a gRPC server)`,
  );
}

async function openEndpoint(
  session: Session,
  proto: TunnelProto,
  target: string,
  {
    flags,
    trafficPolicy,
    labels,
    appProtocol,
  }: {
    flags: TunnelFlags;
    trafficPolicy: string | undefined;
    labels: Record<string, string> | undefined;
    appProtocol: 'http1' | 'http2' | undefined;
  },
): Promise<Endpoint> {
  if (labels) return session.labeledTunnel({ labels, forward: target, appProtocol });
  switch (proto) {
    case 'http':
      return session.httpEndpoint({
        domain: flags.domain,
        trafficPolicy,
        forward: target,
        hostHeaderRewrite: hostHeaderRewrite(flags.hostHeader),
        appProtocol,
      });
    case 'tcp':
      return session.tcpEndpoint({ addr: flags.addr, trafficPolicy, forward: target });
    case 'tls':
      return session.tlsEndpoint({ domain: flags.domain, trafficPolicy, forward: target });
  }
}

/**
 * Run one quick tunnel until SIGINT/SIGTERM (or the server stops it): connect, bind, print
 * `Forwarding <url> -> <target>`, then log each request (http) or connection (tcp, tls).
 * Resolves with the exit code.
 * @example process.exitCode = await runTunnel('http', '3000', { authtoken }, { out: process.stdout, err: process.stderr });
 */
export async function runTunnel(
  proto: TunnelProto,
  target: string,
  flags: TunnelFlags,
  io: TunnelIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  parseLocalAddress(target); // a bad target fails before anything is dialled
  // The endpoint flags' rules, then the policy file's, checked before anything is dialled.
  const trafficPolicy = endpointTrafficPolicy(flags, proto, readPolicyFile(flags.policyFile));
  const labels = tunnelLabels(flags, trafficPolicy); // bad labels fail before anything is dialled too
  const appProtocol = appProtocolFlag(flags.appProtocol);
  const settings = resolveTunnelSettings(
    flags,
    env,
    readAgentConfig(flags.config ?? agentConfigPath(env)),
  );
  if (!settings.authtoken) {
    throw new Error(
      'no authtoken: pass --authtoken, set BURROW_AUTHTOKEN, or store one with `burrow config add-authtoken <token>`',
    );
  }
  const trust = trustOptions(settings, (line) => io.err.write(`${line}\n`));
  let session: Session;
  let endpoint: Endpoint;
  try {
    session = await connect({
      serverAddr: settings.serverAddr,
      authtoken: settings.authtoken,
      ...trust,
      metadata: `burrow ${proto} ${target}`,
    });
  } catch (err) {
    throw new Error(describeError(err));
  }
  try {
    endpoint = await openEndpoint(session, proto, target, {
      flags,
      trafficPolicy,
      labels,
      appProtocol,
    });
  } catch (err) {
    await session.close();
    throw new Error(describeError(err));
  }
  const say = (line: string): boolean => io.err.write(`${logClock()} ${line}\n`);
  session.on('disconnected', (reason) =>
    say(`session lost${reason ? ` (${reason.message})` : ''}; reconnecting`),
  );
  session.on('error', (err) => say(describeError(err)));
  session.on('connected', ({ resumed }) => {
    if (resumed) say(`session back online: ${endpoint.url}`);
  });
  endpoint.on('forward-error', (err) => say(describeError(err)));
  if (proto === 'http') endpoint.on('request', (x) => io.out.write(`${requestLogLine(x)}\n`));
  else
    endpoint.on('connection', (c) =>
      io.out.write(`${logClock()} connection from ${c.clientAddr}\n`),
    );
  // The agent API (127.0.0.1:4040) and inspector, loaded only now: `burrow --version` skips it.
  const agentWeb = await import('./agent-web.js');
  let web: Awaited<ReturnType<typeof agentWeb.startCliAgentWeb>>;
  try {
    web = await agentWeb.startCliAgentWeb(session, flags, settings.webAddr, env, io);
  } catch (err) {
    await endpoint.close().catch(() => undefined);
    await session.close();
    throw err;
  }
  web.tunnels.adopt(agentWeb.quickTunnelDefinition(proto, target, endpoint), endpoint);
  const { done, stop } = agentWeb.serveUntilStopped(session, web);
  // After the signal handlers: SIGINT sent on reading this line is a clean stop, not a kill.
  io.out.write(`Forwarding ${forwardingFrom(endpoint)} -> ${endpoint.forwardsTo}\n`);
  endpoint.on('close', (err) => {
    if (err) {
      say(`the server stopped the endpoint: ${describeError(err)}`);
      stop(1);
    }
  });
  session.on('stop', () => say('the server asked this agent to stop'));
  return done;
}

/**
 * Register `http`, `tcp`, `tls`, `config add-authtoken` and `config add-ca` on the `burrow` program.
 * @example registerTunnelCommands(program);
 */
export function registerTunnelCommands(program: Command): void {
  const kinds: TunnelProto[] = ['http', 'tcp', 'tls'];
  for (const proto of kinds) {
    const cmd = program
      .command(proto)
      .description(describeCommand(proto))
      .argument('<target>', 'port, host:port or URL of the local service');
    if (proto === 'tcp')
      cmd.option('--addr <host:port>', 'a reserved TCP address (default: random port)');
    else cmd.option('--domain <name>', 'the name to serve (default: a random name)');
    if (proto === 'http') {
      cmd.option(
        '--app-protocol <http1|http2>',
        'the protocol the service speaks: http2 for HTTP/2 without TLS (a gRPC server, h2c); default http1',
      );
    }
    cmd.option(
      '--label <key=value>',
      'start a labeled tunnel instead of an endpoint: edges whose tunnel-group backend has these labels route to it (repeatable)',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    );
    addEndpointFlags(cmd, proto);
    addWebOptions(cmd);
    addConnectionOptions(
      cmd.option(
        '--policy-file <file>',
        'traffic policy document (YAML or JSON) for the endpoint; its rules run after those of the flags above',
      ),
    ).action(async (target: string, flags: TunnelFlags) => {
      const code = await runTunnel(proto, target, flags, {
        out: process.stdout,
        err: process.stderr,
      });
      process.exit(code);
    });
  }

  const config = program.command('config').description(describeCommand('config'));
  config
    .command('add-authtoken')
    .description(
      'store an authtoken (and optionally the server and its CA) in the agent config file',
    )
    .argument('<token>', 'the authtoken (POST /credentials)')
    .option('--server <host:port>', 'the edge agent listener to use by default')
    .option('--ca <file>', "the server's CA certificate file")
    .option('--ca-fingerprint <sha256>', "the server CA's SHA-256 fingerprint, to pin it")
    .option('--config <file>', 'agent config file (default: ~/.config/burrow/config.yaml)')
    .action((token: string, flags: AddAuthtokenFlags) => {
      const path = flags.config ?? agentConfigPath();
      if (flags.ca !== undefined) readFileSync(flags.ca); // fail now, not at the first tunnel
      writeAgentConfig(path, {
        authtoken: token,
        server_addr: flags.server,
        ca: flags.ca,
        ca_fingerprint:
          flags.caFingerprint === undefined
            ? undefined
            : `sha256:${parseCaFingerprint(flags.caFingerprint)}`,
      });
      process.stdout.write(`Authtoken saved to ${path}\n`);
    });
  registerAddCa(config);
  registerConfigFileCommands(config);
}
