/**
 * `burrow start [names…] | --all | --none`: the tunnels (version 2) and endpoints (version 3) of
 * ngrok.yml files, over one session, with the agent API and inspector on `web_addr`; and
 * `burrow config check`, which reads the same files and says what `start` would do.
 *
 * Files: every `--config` (repeatable, or comma-separated, merged in order as ngrok merges
 * them), else Burrow's agent config file and the first ngrok.yml found where ngrok keeps it.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { requestLogLine } from '../core/request-log-line.js';
import {
  mergeConfigSources,
  readConfigSource,
  type NgrokAgentConfig,
} from '../agent/ngrok-config.js';
import { CLI_HINTS, connect, describeConnectError, type Session } from '../sdk/index.js';
import { agentConfigPath, resolveTunnelSettings } from './agent-config.js';
import { addWebOptions, type WebFlags } from './agent-web-options.js';
import { serveUntilStopped, startCliAgentWeb } from './agent-web.js';
import { trustOptions } from './ca-config.js';
import { describeCommand } from './command-index.js';
import { forwardingFrom, type TunnelIo } from './tunnel-commands.js';

export interface StartFlags extends WebFlags {
  all?: boolean;
  none?: boolean;
  config?: string[];
  server?: string;
  authtoken?: string;
  ca?: string;
  caFingerprint?: string;
}

/**
 * Where ngrok keeps its config file on this system, newest first (ngrok's own order).
 * @example ngrokConfigPaths({ HOME: '/home/me' }) // ['/home/me/.config/ngrok/ngrok.yml', …]
 */
export function ngrokConfigPaths(
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform = process.platform,
): string[] {
  const home = env.HOME || homedir();
  const paths = [join(env.XDG_CONFIG_HOME || join(home, '.config'), 'ngrok', 'ngrok.yml')];
  if (platform === 'darwin')
    paths.push(join(home, 'Library', 'Application Support', 'ngrok', 'ngrok.yml'));
  paths.push(join(home, '.ngrok2', 'ngrok.yml'));
  return paths;
}

/** The files `start` and `config check` read. */
export function configFiles(flags: { config?: string[] }, env: NodeJS.ProcessEnv): string[] {
  const given = (flags.config ?? [])
    .flatMap((c) => c.split(','))
    .map((c) => c.trim())
    .filter((c) => c !== '');
  if (given.length > 0) return given;
  const own = agentConfigPath(env);
  const ngrok = ngrokConfigPaths(env).find((p) => existsSync(p));
  return [...(existsSync(own) ? [own] : []), ...(ngrok ? [ngrok] : [])];
}

/** Read and merge the files; none at all is an error that says where they were looked for. */
export function loadNgrokConfig(
  flags: { config?: string[] },
  env: NodeJS.ProcessEnv,
): { files: string[]; config: NgrokAgentConfig } {
  const files = configFiles(flags, env);
  if (files.length === 0) {
    throw new Error(
      `no config file: pass --config ngrok.yml, or keep one at ${ngrokConfigPaths(env).join(' or ')} (or ${agentConfigPath(env)})`,
    );
  }
  return { files, config: mergeConfigSources(files.map(readConfigSource)) };
}

/** Which definitions to start: the names given, all, or none; an unknown name is an error. */
export function pickTunnels(
  config: NgrokAgentConfig,
  names: string[],
  flags: StartFlags,
): NgrokAgentConfig['tunnels'] {
  const chosen = [flags.all === true, flags.none === true, names.length > 0].filter(Boolean).length;
  if (chosen !== 1)
    throw new Error(
      'name the tunnels to start, or give --all (every one) or --none (only the agent API)',
    );
  if (flags.none) return [];
  if (flags.all) return config.tunnels;
  const known = config.tunnels.map((t) => t.name);
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length > 0) {
    throw new Error(
      `no tunnel or endpoint is named ${unknown.join(', ')} in the config; ${known.length > 0 ? `they are ${known.join(', ')}` : 'it defines none'}`,
    );
  }
  return config.tunnels.filter((t) => names.includes(t.name));
}

/**
 * Run `burrow start` until SIGINT/SIGTERM; resolves with the exit code.
 * @example process.exitCode = await runStart(['web'], { config: ['ngrok.yml'] }, io);
 */
export async function runStart(
  names: string[],
  flags: StartFlags,
  io: TunnelIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const { config } = loadNgrokConfig(flags, env);
  const wanted = pickTunnels(config, names, flags);
  for (const where of config.ignored)
    io.err.write(`burrow: ignoring ${where}: it means nothing to a Burrow agent\n`);
  const settings = resolveTunnelSettings(flags, env, {
    server_addr: config.serverAddr,
    authtoken: config.authtoken,
    ca: config.caFile,
    ca_certs: config.caCerts,
    ca_fingerprint: config.caFingerprint,
    web_addr: config.webAddr,
  });
  if (!settings.authtoken) {
    throw new Error(
      'no authtoken: put authtoken (version 2) or agent.authtoken (version 3) in the config file, pass --authtoken, or set BURROW_AUTHTOKEN',
    );
  }
  let session: Session;
  try {
    session = await connect({
      serverAddr: settings.serverAddr,
      authtoken: settings.authtoken,
      ...trustOptions(settings, (line) => io.err.write(`${line}\n`)),
      metadata: config.metadata ?? 'burrow start',
    });
  } catch (err) {
    throw new Error(describeConnectError(err, CLI_HINTS));
  }
  const web = await startCliAgentWeb(
    session,
    flags,
    settings.webAddr,
    env,
    io,
    config.inspectDbSize,
  ).catch(async (err: unknown) => {
    await session.close();
    throw err;
  });
  // Printed once the signal handlers are in place: a script that sends SIGINT as soon as it reads
  // a Forwarding line must get a clean stop, not the default action's kill.
  const forwarding: string[] = [];
  try {
    for (const definition of wanted) {
      const tunnel = await web.tunnels.start(definition);
      const { endpoint } = tunnel;
      forwarding.push(
        `Forwarding ${definition.name} ${forwardingFrom(endpoint)} -> ${endpoint.forwardsTo}\n`,
      );
      endpoint.on('request', (x) => io.out.write(`${requestLogLine(x)} (${definition.name})\n`));
    }
  } catch (err) {
    await web.tunnels.closeAll();
    await web.close();
    await session.close();
    throw err;
  }
  session.on('disconnected', (reason) =>
    io.err.write(`session lost${reason ? ` (${reason.message})` : ''}; reconnecting\n`),
  );
  const { done } = serveUntilStopped(session, web);
  for (const line of forwarding) io.out.write(line);
  return done;
}

/**
 * Register `burrow start`.
 * @example registerStartCommand(program);
 */
export function registerStartCommand(program: Command): void {
  const cmd = program
    .command('start')
    .description(describeCommand('start'))
    .argument('[names...]', 'the tunnels (version 2) or endpoints (version 3) to start, by name')
    .option('--all', 'start every tunnel and endpoint of the config')
    .option('--none', 'start none: only the session and the agent API, which can start them')
    .option(
      '--config <file>',
      'an ngrok.yml (version 2 or 3) or Burrow agent config; repeat it (or separate with commas) to merge several, later ones winning',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option(
      '--server <host:port>',
      'the edge agent listener [env BURROW_SERVER_ADDR] (default: the config)',
    )
    .option('--authtoken <token>', 'authtoken [env BURROW_AUTHTOKEN] (default: the config)')
    .option(
      '--ca <file>',
      "the server's CA certificate [env BURROW_CA] (default: root_cas / connect_cas)",
    )
    .option(
      '--ca-fingerprint <sha256>',
      "pin the server's CA by its SHA-256 fingerprint [env BURROW_CA_FINGERPRINT]",
    );
  addWebOptions(cmd).action(async (names: string[], flags: StartFlags) => {
    process.exit(await runStart(names, flags, { out: process.stdout, err: process.stderr }));
  });
}
