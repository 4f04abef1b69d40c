/**
 * `burrow server`, `burrow api-key create` and `burrow user …`: the commands that run or open the
 * server's own store, with the server options of core/server-options.ts as flags.
 */
import { Option, type Command } from 'commander';
import { loadServerConfig } from '../core/config.js';
import { envName, SERVER_OPTIONS } from '../core/server-options.js';
import { createLogger } from '../core/logger.js';
import { logDestination } from '../core/log-format.js';
import { startServer, withServerRepositories } from './server.js';
import { announceAgentListener } from './agent-hint.js';
import { describeCommand } from './command-index.js';
import { apiKeyLimits, registerUserCommand } from './user-command.js';
import { registerSshKeyCommand } from './ssh-key-command.js';

function collectFlags(
  opts: Record<string, string | undefined>,
): Record<string, string | undefined> {
  const flags: Record<string, string | undefined> = {};
  for (const spec of SERVER_OPTIONS) {
    const camel = spec.name.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    const value = opts[camel];
    if (value !== undefined) flags[spec.name] = value;
  }
  if (opts.config !== undefined) flags.config = opts.config;
  return flags;
}

function addServerOptions(cmd: Command, names?: readonly string[]): Command {
  cmd.addOption(
    new Option('--config <file>', 'YAML or JSON config file; keys are the option names').env(
      'BURROW_CONFIG',
    ),
  );
  for (const spec of SERVER_OPTIONS) {
    if (names && !names.includes(spec.name)) continue;
    const env = envName(spec.name);
    const def = spec.default ? ` (default: ${spec.default})` : '';
    const option = new Option(`--${spec.name} <value>`, `${spec.description}${def} [env ${env}]`);
    // A repeated flag adds to the list (config.ts splits it at commas) instead of replacing it.
    if (spec.repeatable)
      option.argParser((value: string, previous: string | undefined) =>
        previous === undefined ? value : `${previous},${value}`,
      );
    cmd.addOption(option);
  }
  return cmd;
}

/**
 * Register `server`, `api-key create` and `user` on the `burrow` program.
 * @example registerServerCommands(program);
 */
export function registerServerCommands(program: Command): void {
  addServerOptions(program.command('server').description(describeCommand('server'))).action(
    async (opts: Record<string, string | undefined>) => {
      const config = loadServerConfig(collectFlags(opts));
      const logger = createLogger(
        config.logLevel,
        logDestination(config.logFormat, process.stdout.isTTY),
      );
      // The handlers go in before the server starts: a SIGTERM sent as soon as a listener's line
      // is logged waits for the start to finish and then closes cleanly, never the default kill.
      const started = startServer(config, logger);
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        logger.info({ signal }, 'shutting down');
        started
          .then((server) => server.close())
          .then(
            () => process.exit(0),
            (err: unknown) => {
              logger.error({ err }, 'shutdown failed');
              process.exit(1);
            },
          );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
      const server = await started;
      if (server.edge) await announceAgentListener(server.edge, config, logger);
    },
  );

  const apiKey = program.command('api-key').description(describeCommand('api-key'));
  addServerOptions(apiKey.command('create').description('create an API key and print it once'), [
    'data-dir',
    'database',
  ])
    .option('--description <text>', 'description of the key', '')
    .option('--user <name>', "a dashboard user's key, with their role (default: the account's)")
    .option('--role <role>', "admin, operator or viewer: narrower than the owner's role")
    .option(
      '--scope <scope>',
      'limit the key to a permission such as endpoints:write (repeat for more)',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .action(async (opts: Record<string, string | undefined> & { scope?: string[] }) => {
      // --role here is the key's, not the server's (`burrow server --role`): kept out of the config.
      const { scope, role, ...flags } = opts;
      const key = await withServerRepositories(collectFlags(flags), async (repos) => {
        const limits = await apiKeyLimits(repos.users, { user: opts.user, role, scopes: scope });
        return repos.apiKeys.create({ description: opts.description ?? '', ...limits });
      });
      process.stdout.write(`${key.token}\n`);
      process.stderr.write(
        `Created API key ${key.id}. This is the only time its token is shown; store it now.\n`,
      );
    });

  registerUserCommand(
    program,
    (cmd) => addServerOptions(cmd, ['data-dir', 'database']),
    collectFlags,
  );
  registerSshKeyCommand(
    program,
    (cmd) => addServerOptions(cmd, ['data-dir', 'database']),
    collectFlags,
  );
}
