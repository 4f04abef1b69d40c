/**
 * `burrow ssh-key add <public key file>`: register an SSH key for `ssh -R` tunnels (docs/ssh.md)
 * directly in the server's store, as `burrow api-key create` does: the same repository, checks
 * and ACL rules as `POST /ssh_credentials`.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { describeCommand } from './command-index.js';
import { withServerRepositories } from './server.js';

type Flags = (opts: Record<string, string | undefined>) => Record<string, string | undefined>;

const collect = (value: string, previous: string[] | undefined): string[] => [
  ...(previous ?? []),
  value,
];

/**
 * Register `ssh-key add`; `storeOptions` adds `--data-dir` and `--database`.
 * @example registerSshKeyCommand(program, (cmd) => addServerOptions(cmd, ['data-dir', 'database']), collectFlags);
 */
export function registerSshKeyCommand(
  program: Command,
  storeOptions: (cmd: Command) => Command,
  flags: Flags,
): void {
  const sshKey = program.command('ssh-key').description(describeCommand('ssh-key'));
  storeOptions(
    sshKey
      .command('add <public-key-file>')
      .description(
        'register an SSH public key (e.g. ~/.ssh/id_ed25519.pub; - for stdin) for ssh -R tunnels',
      )
      .option(
        '--acl <rule>',
        "a bind rule, as an authtoken's (repeatable; none: every bind)",
        collect,
      )
      .option('--owner <id>', 'a bot user id (default: the account)')
      .option('--description <text>', 'description of the key', ''),
  ).action(
    async (
      file: string,
      opts: Record<string, string | undefined> & { acl?: string[]; owner?: string },
    ) => {
      const { acl, owner, description, ...rest } = opts;
      const publicKey = readFileSync(file === '-' ? 0 : file, 'utf8');
      const key = await withServerRepositories(flags(rest), (repos) =>
        repos.sshCredentials.create({ public_key: publicKey, acl, owner_id: owner, description }),
      );
      process.stdout.write(`${key.id} ${key.fingerprint}\n`);
    },
  );
}
