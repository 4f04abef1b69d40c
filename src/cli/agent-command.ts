/**
 * `burrow agent`: run the device agent (src/agent/) until SIGINT/SIGTERM.
 */
import { Option, type Command } from 'commander';
import { startAgent, type AgentOptions } from '../agent/agent.js';
import { AgentStartupError } from '../agent/errors.js';
import { createLogger, type Logger } from '../core/logger.js';
import {
  addConnectionOptions,
  agentConfigPath,
  readAgentConfig,
  resolveTunnelSettings,
} from './agent-config.js';
import { trustOptions } from './ca-config.js';
import { describeCommand } from './command-index.js';
import { BURROW_VERSION } from './version.js';

/** The flags of `burrow agent` as commander gives them. */
export interface AgentFlags {
  server?: string;
  authtoken?: string;
  ca?: string;
  caFingerprint?: string;
  config?: string;
  listen: string;
  state: string;
  defaultPolicy: string;
  expose?: string;
  apiToken?: string;
  logLevel: string;
  /** The inspector (off unless given: a device agent runs as a service). */
  webAddr?: string;
  webAuth?: string;
}

/** `--web-addr`: an address, or off (`false`, or not given). */
function webAddrOf(value: string | false | undefined): string | false {
  return value === undefined || value === 'false' ? false : value;
}

/**
 * Run the agent with `flags` until a signal, a fatal refusal or a stop from the server; resolves
 * with the exit code: 0 stopped, 1 could not go on, 2 bad configuration (message on `stderr`).
 * @example process.exitCode = await runAgent(flags, { defaultPolicyExplicit: false });
 */
export async function runAgent(
  flags: AgentFlags,
  source: { defaultPolicyExplicit: boolean },
  io: { stderr: NodeJS.WritableStream; logger?: Logger } = { stderr: process.stderr },
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const settings = resolveTunnelSettings(
    flags,
    env,
    readAgentConfig(flags.config ?? agentConfigPath(env)),
  );
  const logger = io.logger ?? createLogger(flags.logLevel);
  const trust = trustOptions(settings, (line) => io.stderr.write(`${line}\n`));
  const options: AgentOptions = {
    serverAddr: settings.serverAddr,
    authtoken: settings.authtoken,
    ...trust,
    listen: flags.listen,
    statePath: flags.state,
    defaultPolicyPath: flags.defaultPolicy,
    defaultPolicyExplicit: source.defaultPolicyExplicit,
    expose: flags.expose,
    apiToken: flags.apiToken === '' ? undefined : flags.apiToken,
    webAddr: webAddrOf(flags.webAddr ?? env.BURROW_WEB_ADDR ?? settings.webAddr),
    webAuth: flags.webAuth ?? (env.BURROW_WEB_AUTH || undefined),
    version: BURROW_VERSION,
  };
  let agent;
  try {
    agent = await startAgent(options, logger);
  } catch (err) {
    if (err instanceof AgentStartupError) {
      io.stderr.write(`burrow agent: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const running = agent;
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (code: number, reason: string): void => {
      if (stopping) return;
      stopping = true;
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      if (code === 0) logger.info({ reason }, 'agent stopping');
      else {
        logger.error({ reason }, 'agent stopping');
        io.stderr.write(`burrow agent: ${reason}\n`);
      }
      void running.close().then(
        () => resolve(code),
        () => resolve(code || 1),
      );
    };
    const onSignal = (signal: NodeJS.Signals): void => stop(0, signal);
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    void running.ended.then(({ code, reason }) => stop(code, reason));
  });
}

/**
 * Register `burrow agent` on the `burrow` program.
 * @example registerAgentCommand(program);
 */
export function registerAgentCommand(program: Command): void {
  addConnectionOptions(program.command('agent').description(describeCommand('agent')))
    .addOption(
      new Option('--listen <host:port>', 'where the agent API listens')
        .env('BURROW_AGENT_API_LISTEN')
        .default('127.0.0.1:8000'),
    )
    .addOption(
      new Option('--state <file>', 'the state file that keeps the tunnels')
        .env('BURROW_AGENT_STATE')
        .default('tunnels.json'),
    )
    .addOption(
      new Option(
        '--default-policy <file>',
        'traffic policy (JSON or YAML) for tunnels created without one; the implicit test.json may be absent',
      )
        .env('BURROW_AGENT_DEFAULT_POLICY')
        .default('test.json'),
    )
    .addOption(
      new Option(
        '--expose <domain>',
        'also serve the agent API through an http tunnel at this domain (needs --api-token)',
      ).env('BURROW_AGENT_EXPOSE'),
    )
    .addOption(
      new Option(
        '--api-token <token>',
        'bearer token every agent API request must carry (local and exposed)',
      ).env('BURROW_AGENT_API_TOKEN'),
    )
    .addOption(
      new Option(
        '--web-addr <host:port>',
        "serve the request inspector and a read-only agent API (ngrok's shapes, docs/agent-api.md) here, e.g. 127.0.0.1:4040; off by default",
      ).env('BURROW_WEB_ADDR'),
    )
    .addOption(
      new Option(
        '--web-auth <user:password>',
        'HTTP Basic credential the inspector asks of every request; required beyond loopback',
      ).env('BURROW_WEB_AUTH'),
    )
    .addOption(
      new Option('--log-level <level>', 'trace, debug, info, warn, error')
        .env('BURROW_LOG_LEVEL')
        .default('info'),
    )
    .action(async (flags: AgentFlags, cmd: Command) => {
      const explicit = cmd.getOptionValueSource('defaultPolicy') !== 'default';
      process.exit(await runAgent(flags, { defaultPolicyExplicit: explicit }));
    });
}
