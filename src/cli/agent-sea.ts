/**
 * The self-contained agent's entry point: `npm run build:agent` bundles it (esbuild, CommonJS)
 * into a Node single executable application, `dist/sea/burrow-agent`, that runs where no Node is
 * installed. It has the agent side of `burrow` only: `agent`, `http`, `tcp`, `tls`, `start` and
 * `config`; nothing of the server (no store, no native module) is in it.
 */
import { Command } from 'commander';
import { registerAgentCommand } from './agent-command.js';
import { registerStartCommand } from './start-command.js';
import { registerTunnelCommands } from './tunnel-commands.js';
import { BURROW_VERSION } from './version.js';

const program = new Command('burrow-agent')
  .description('Burrow agent: put local services online through a burrow server')
  .version(BURROW_VERSION)
  .showHelpAfterError();
registerAgentCommand(program);
registerTunnelCommands(program);
registerStartCommand(program);
program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`burrow-agent: ${(err as Error).message}\n`);
  process.exit(1);
});
