import { Command } from 'commander';
import { COMMANDS, requestedCommand } from './command-index.js';
import { BURROW_VERSION } from './version.js';

/** Adds one file's commands to the program. */
type RegisterCommands = (program: Command) => void;

const serverCommands = async (): Promise<RegisterCommands> =>
  (await import('./server-commands.js')).registerServerCommands;
const tunnelCommands = async (): Promise<RegisterCommands> =>
  (await import('./tunnel-commands.js')).registerTunnelCommands;

/**
 * The file that registers each subcommand, imported only when that command runs: a call such as
 * `burrow --version` or `burrow http 3000` loads the one file it needs, not the server, the store
 * and the policy engine of every other command (importing them all took over a second).
 */
const LOADERS: Record<string, () => Promise<RegisterCommands>> = {
  server: serverCommands,
  'api-key': serverCommands,
  user: serverCommands,
  'ssh-key': serverCommands,
  http: tunnelCommands,
  tcp: tunnelCommands,
  tls: tunnelCommands,
  config: tunnelCommands,
  agent: async () => (await import('./agent-command.js')).registerAgentCommand,
  endpoint: async () => (await import('./endpoint-command.js')).registerEndpointCommand,
  start: async () => (await import('./start-command.js')).registerStartCommand,
};

/**
 * The `burrow` command line for `argv`: the subcommand it names is registered in full (its file
 * loaded now), every other one by name and description only.
 * @example await (await buildCli(process.argv)).parseAsync(process.argv);
 */
export async function buildCli(argv: readonly string[]): Promise<Command> {
  const program = new Command('burrow')
    .description('Burrow: a self-hosted edge, domain and tunnel platform')
    .version(BURROW_VERSION)
    .showHelpAfterError();
  const requested = requestedCommand(argv);
  const load = requested && LOADERS[requested.name];
  if (load) (await load())(program);
  // The others by name, for `burrow --help` (shown only when no command is named, so in order).
  const registered = new Set(program.commands.map((c) => c.name()));
  for (const entry of COMMANDS) {
    if (!registered.has(entry.name)) program.command(entry.name).description(entry.description);
  }
  return program;
}

/** Run the CLI with `argv` (as `process.argv`); exits non-zero with a message on bad input. */
export async function main(argv: string[]): Promise<void> {
  try {
    await (await buildCli(argv)).parseAsync(argv);
  } catch (err) {
    // Loaded only on this path: core/config.ts is not needed by `burrow --version`.
    const { ConfigError } = await import('../core/config.js');
    if (err instanceof ConfigError) {
      process.stderr.write(`burrow: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`burrow: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
