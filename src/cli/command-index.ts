/**
 * The `burrow` subcommands and the file that registers each, loaded only when it runs: a call
 * such as `burrow --version` or `burrow http 3000` imports the one file it needs, not the server,
 * the store and the policy engine of every other command (importing them all took over a second).
 */
import type { Command } from 'commander';

/** Adds one file's commands to the program. */
export type RegisterCommands = (program: Command) => void;

/** One subcommand: its name, its line in `burrow --help`, and the file that registers it. */
export interface CommandEntry {
  name: string;
  description: string;
  load: () => Promise<RegisterCommands>;
}

const loadServerCommands = async (): Promise<RegisterCommands> =>
  (await import('./server-commands.js')).registerServerCommands;
const loadTunnelCommands = async (): Promise<RegisterCommands> =>
  (await import('./tunnel-commands.js')).registerTunnelCommands;

/** Every subcommand, in the order `burrow --help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'server',
    description: 'run the management API and the edge',
    load: loadServerCommands,
  },
  {
    name: 'api-key',
    description: 'manage API keys directly in the database',
    load: loadServerCommands,
  },
  {
    name: 'user',
    description: 'manage dashboard users (people who sign in)',
    load: loadServerCommands,
  },
  {
    name: 'http',
    description: 'put a local HTTP service online (e.g. burrow http 3000)',
    load: loadTunnelCommands,
  },
  {
    name: 'tcp',
    description: 'put a local TCP service online (e.g. burrow tcp 22)',
    load: loadTunnelCommands,
  },
  {
    name: 'tls',
    description: 'put a local TLS service online, TLS passed through (e.g. burrow tls 443)',
    load: loadTunnelCommands,
  },
  {
    name: 'config',
    description: "manage the agent config file of 'burrow http|tcp|tls' and 'burrow agent'",
    load: loadTunnelCommands,
  },
  {
    name: 'agent',
    description:
      'run the device agent: a local REST API that creates, lists and deletes tunnels, kept in a state file and recreated at start',
    load: async () => (await import('./agent-command.js')).registerAgentCommand,
  },
  {
    name: 'endpoint',
    description: 'manage cloud endpoints through the API',
    load: async () => (await import('./endpoint-command.js')).registerEndpointCommand,
  },
];

/**
 * The description of the subcommand `name` (each file registers its commands with it).
 * @example describeCommand('http') // 'put a local HTTP service online (e.g. burrow http 3000)'
 */
export function describeCommand(name: string): string {
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) throw new Error(`no burrow command is named ${name}`);
  return entry.description;
}

/**
 * The subcommand `argv` (as `process.argv`) runs, if it names one: the first word that is not an
 * option, or the word after `help`. Global options (`--version`, `--help`) take no value, so
 * the first word is the command.
 * @example requestedCommand(['node', 'burrow', 'help', 'http']) // the entry of 'http'
 */
export function requestedCommand(argv: readonly string[]): CommandEntry | undefined {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  const name = words[0] === 'help' ? words[1] : words[0];
  return COMMANDS.find((c) => c.name === name);
}
