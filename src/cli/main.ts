import { Command } from 'commander';
import { COMMANDS, requestedCommand } from './command-index.js';

/** The version `burrow --version` prints; test/install.test.ts checks it against package.json. */
export const BURROW_VERSION = '0.1.0';

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
  if (requested) (await requested.load())(program);
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
