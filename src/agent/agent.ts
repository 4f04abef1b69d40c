/**
 * `burrow agent`: the device agent (docs/device-agent.md). It serves a REST API on `--listen` (and,
 * with `--expose`, through a tunnel at that domain) that creates, lists and deletes tunnels,
 * keeps them in the state file, and recreates them at start.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import { hostnameProblem, isLoopbackHost } from '../core/hostname.js';
import type { Logger } from '../core/logger.js';
import { connect, parseCaFingerprint, type ConnectOptions } from '../sdk/index.js';
import { startAgentWeb } from './agent-web.js';
import { adoptedDefinition } from './named-tunnels.js';
import { AgentStartupError } from './errors.js';
import { createAgentApi } from './local-api.js';
import { loadDefaultPolicy } from './policy.js';
import { StateFile, StateFileError, type StoredTunnel } from './state-file.js';
import type { TunnelDefinition } from './tunnel-definition.js';
import { tunnelKey } from './tunnel-keys.js';
import { TunnelManager } from './tunnels.js';

/** Everything the agent runs with (the CLI resolves flags, environment and config file). */
export interface AgentOptions {
  /** The edge's agent listener, host:port. */
  serverAddr: string;
  authtoken: string | undefined;
  /**
   * CA files (`<data-dir>/ca.pem`) or PEM texts trusted on top of the system roots; undefined:
   * the system roots alone.
   */
  ca: string | readonly string[] | undefined;
  /** Pin the server's CA by its SHA-256 fingerprint (`sha256:AB:…`). */
  caFingerprint?: string | undefined;
  /** Where the local API listens, host:port (port 0: any free port). */
  listen: string;
  /** The state file. */
  statePath: string;
  /** The default policy file, and whether the user named it (a missing implicit one is fine). */
  defaultPolicyPath: string;
  defaultPolicyExplicit: boolean;
  /** Serve the API through an http tunnel at this domain too. */
  expose: string | undefined;
  /** Bearer token every API request must carry. */
  apiToken: string | undefined;
  /** Extra SDK settings (heartbeat, reconnect), for tests and tuning. */
  connectOptions?: Partial<ConnectOptions>;
  /** Backoff of the first connection and of refused binds, in ms. */
  retry?: { initialDelay: number; maxDelay: number };
  /**
   * The request inspector and read-only agent API (docs/agent-api.md) on this address (the next
   * free port when taken); undefined or false: none.
   */
  webAddr?: string | false;
  /** `user:password` the inspector asks of every request; required beyond loopback. */
  webAuth?: string;
  /** The version `/api/status` of the inspector shows (the CLI's). */
  version?: string;
}

/** A running agent. */
export interface RunningAgent {
  /** The local API's address, host:port, with the real port. */
  address: string;
  /** The inspector's address (`webAddr`), with the real port; undefined when off. */
  webAddress: string | undefined;
  tunnels: TunnelManager;
  /** Settles when the agent has to end: 0 when the server asked it to stop, 1 when it cannot go on. */
  ended: Promise<{ code: number; reason: string }>;
  /** Stop serving and close the session; the state file keeps the tunnels. */
  close(): Promise<void>;
}

/**
 * Parse `--listen`: `host:port`, `[v6]:port`, or a port alone (on 127.0.0.1).
 * @example parseListen('127.0.0.1:8000') // { host: '127.0.0.1', port: 8000 }
 */
export function parseListen(value: string): { host: string; port: number } {
  const text = value.trim();
  const hp = parseHostPort(/^\d+$/.test(text) ? `127.0.0.1:${text}` : text);
  if (!hp) {
    throw new AgentStartupError(
      `--listen must be <host>:<port> like 127.0.0.1:8000 (port 0 picks a free one), got '${value}'`,
    );
  }
  return hp;
}

/**
 * Check the options that need no I/O beyond reading the CA; throws AgentStartupError naming the
 * flag and the fix.
 * @example checkAgentOptions({ ...options, expose: 'agent.sitea.example.com', apiToken: undefined }) // throws
 */
export function checkAgentOptions(options: AgentOptions): void {
  if (!options.authtoken) {
    throw new AgentStartupError(
      'no authtoken: pass --authtoken, set BURROW_AUTHTOKEN, or store one with `burrow config add-authtoken <token>`',
    );
  }
  parseListen(options.listen);
  if (options.apiToken !== undefined && !/^\S+$/.test(options.apiToken)) {
    throw new AgentStartupError('--api-token must be a non-empty token without spaces');
  }
  if (options.expose !== undefined) {
    const problem = hostnameProblem(options.expose.trim().toLowerCase(), false);
    if (problem !== undefined) {
      throw new AgentStartupError(
        `--expose must be a hostname under a reserved domain, like agent.sitea.example.com (got '${options.expose}': ${problem})`,
      );
    }
    if (options.apiToken === undefined) {
      throw new AgentStartupError(
        '--expose serves the agent API publicly, so it needs --api-token <token> (or BURROW_AGENT_API_TOKEN): every exposed request must carry "Authorization: Bearer <token>"',
      );
    }
  }
  const cas: readonly string[] = typeof options.ca === 'string' ? [options.ca] : (options.ca ?? []);
  for (const ca of cas) {
    if (ca.includes('-----BEGIN')) continue;
    try {
      readFileSync(ca);
    } catch (err) {
      throw new AgentStartupError(`cannot read the CA file ${ca}: ${(err as Error).message}`);
    }
  }
  if (options.caFingerprint !== undefined) {
    try {
      parseCaFingerprint(options.caFingerprint);
    } catch (err) {
      throw new AgentStartupError(`--ca-fingerprint: ${(err as Error).message}`);
    }
  }
}

/** A device-agent tunnel as the inspector names it: by its url_part (a labeled one by its labels). */
function deviceTunnelDefinition(record: StoredTunnel, target: string): TunnelDefinition {
  if (record.protocol === 'labeled') {
    return adoptedDefinition(tunnelKey(record), 'labeled', target, { labels: record.labels });
  }
  return adoptedDefinition(record.url_part, record.protocol, target, {
    domain: record.domain || undefined,
    url: record.url,
  });
}

async function listen(server: Server, host: string, port: number): Promise<string> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (err) {
    throw new Error(`cannot listen on ${formatHostPort(host, port)}: ${(err as Error).message}`);
  }
  const addr = server.address() as AddressInfo;
  return formatHostPort(addr.address, addr.port);
}

/**
 * Start the agent: check the options, load the default policy and the state file (either one
 * broken stops it with an AgentStartupError naming the file), serve the API, then connect and
 * bring every stored tunnel back in the background.
 * @example
 * const agent = await startAgent(options, createLogger('info'));
 * const { code } = await agent.ended;
 */
export async function startAgent(options: AgentOptions, logger: Logger): Promise<RunningAgent> {
  checkAgentOptions(options);
  const expose = options.expose?.trim().toLowerCase();
  const defaultPolicy = loadDefaultPolicy(options.defaultPolicyPath, options.defaultPolicyExplicit);
  if (!defaultPolicy) {
    logger.warn(
      { file: resolvePath(options.defaultPolicyPath) },
      'no default policy file: tunnels created without a policy get none',
    );
  } else {
    logger.info({ file: defaultPolicy.path }, 'default policy loaded');
    for (const [protocol, why] of Object.entries(defaultPolicy.unusableOn)) {
      logger.info({ protocol, why }, `the default policy does not apply to ${protocol} tunnels`);
    }
  }

  const state = new StateFile(options.statePath);
  let loaded;
  try {
    loaded = await state.load();
  } catch (err) {
    if (err instanceof StateFileError) throw new AgentStartupError(err.message, { cause: err });
    throw err;
  }
  if (!loaded.existed) {
    // Written now so that a folder the agent cannot write to stops it here, not at the first create.
    await state.save([]).catch((err: unknown) => {
      throw new AgentStartupError((err as Error).message, { cause: err });
    });
  }

  // The exposed tunnel forwards to the API, which needs the tunnels: bound once both exist.
  let exposedApi: RequestListener = () => undefined;
  const tunnels = new TunnelManager({
    state,
    defaultPolicy,
    logger,
    serverAddr: options.serverAddr,
    retry: options.retry,
    connect: () =>
      connect({
        serverAddr: options.serverAddr,
        authtoken: options.authtoken!,
        ca: options.ca,
        caFingerprint: options.caFingerprint,
        metadata: 'burrow agent',
        reconnect: { initialDelay: 250, maxDelay: 15_000 },
        ...options.connectOptions,
      }),
    expose: expose ? { domain: expose, handler: (req, res) => exposedApi(req, res) } : undefined,
    onEndpoint: (record, target, endpoint) =>
      web?.tunnels.adopt(deviceTunnelDefinition(record, target), endpoint),
  });
  // The inspector sees each tunnel's requests; its tunnels are those of this agent's /tunnels API.
  const web =
    options.webAddr === undefined || options.webAddr === false
      ? undefined
      : await startAgentWeb({
          session: () => tunnels.currentSession,
          readOnly:
            "this device agent's tunnels are created and deleted with its own API (POST /tunnels, DELETE /tunnels/{url_part}, docs/device-agent.md)",
          webAddr: options.webAddr,
          credential: options.webAuth,
          version: options.version ?? 'unknown',
          warn: (line) => logger.warn(line),
          logger,
        });
  if (web?.listener) logger.info({ address: web.listener.address }, 'agent inspector listening');
  const api = createAgentApi({ tunnels, apiToken: options.apiToken, logger });
  exposedApi = api('exposed');

  const { host, port } = parseListen(options.listen);
  const server = createServer(api('local'));
  const address = await listen(server, host, port);
  logger.info(
    { address, state: state.path, tunnels: loaded.tunnels.length },
    'agent API listening',
  );
  if (!isLoopbackHost(host) && options.apiToken === undefined) {
    logger.warn(
      { address },
      'the agent API listens beyond loopback without --api-token: anyone who can reach it can create tunnels',
    );
  }

  const ended = new Promise<{ code: number; reason: string }>((resolve) => {
    tunnels.once('fatal', (err) => resolve({ code: 1, reason: err.message }));
    tunnels.once('stop', () => resolve({ code: 0, reason: 'the server asked this agent to stop' }));
  });
  tunnels.start(loaded.tunnels);

  let closing: Promise<void> | undefined;
  return {
    address,
    webAddress: web?.listener?.address,
    tunnels,
    ended,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await tunnels.close();
        await web?.close();
        await stopped;
      })();
      return closing;
    },
  };
}
