/**
 * The `burrow` subcommands by name and description: what `burrow --help` lists without loading
 * any command's file (main.ts loads the one that runs), and what each file registers its
 * commands with. Imports nothing, so the self-contained agent (agent-sea.ts) can use it without
 * taking in the server.
 */

/** One subcommand: its name and its line in `burrow --help`. */
export interface CommandEntry {
  name: string;
  description: string;
}

/** Every subcommand, in the order `burrow --help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'server',
    description: 'run the management API and the edge',
  },
  {
    name: 'api-key',
    description: 'manage API keys directly in the database',
  },
  {
    name: 'user',
    description: 'manage dashboard users (people who sign in)',
  },
  {
    name: 'ssh-key',
    description: 'register SSH public keys for ssh -R tunnels directly in the database',
  },
  {
    name: 'http',
    description: 'put a local HTTP service online (e.g. burrow http 3000)',
  },
  {
    name: 'tcp',
    description: 'put a local TCP service online (e.g. burrow tcp 22)',
  },
  {
    name: 'tls',
    description: 'put a local TLS service online, TLS passed through (e.g. burrow tls 443)',
  },
  {
    name: 'config',
    description: "manage the agent config file of 'burrow http|tcp|tls' and 'burrow agent'",
  },
  {
    name: 'start',
    description:
      'start the tunnels and endpoints of an ngrok.yml (version 2 or 3) by name, or --all, with the agent API on 127.0.0.1:4040',
  },
  {
    name: 'agent',
    description:
      'run the device agent: a local REST API that creates, lists and deletes tunnels, kept in a state file and recreated at start',
  },
  {
    name: 'endpoint',
    description: 'manage cloud endpoints through the API',
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
