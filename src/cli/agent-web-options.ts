/**
 * The `--web-addr` and `--web-auth` options of the commands that run an agent. Kept apart from
 * agent-web.ts, which loads the agent API (and the policy engine) once a tunnel is online: this
 * file imports nothing, so registering the options costs nothing at start.
 */
import type { Command } from 'commander';

/** The flags of the agent API. */
export interface WebFlags {
  webAddr?: string;
  webAuth?: string;
}

/**
 * Add `--web-addr` and `--web-auth` to a command that runs an agent.
 * @example addWebOptions(program.command('start'))
 */
export function addWebOptions(command: Command): Command {
  return command
    .option(
      '--web-addr <host:port|false>',
      'the agent API and inspector [env BURROW_WEB_ADDR] (default: config file web_addr, else 127.0.0.1:4040, or the next free port when it is taken; false: off)',
    )
    .option(
      '--web-auth <user:password>',
      'HTTP Basic credential the agent API asks of every request; required to listen beyond loopback [env BURROW_WEB_AUTH]',
    );
}
