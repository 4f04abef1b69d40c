import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import type { Command } from 'commander';
import { quote } from '../core/quote.js';
import {
  parseRole,
  parseScopes,
  ROLES,
  roleWithin,
  type Permission,
  type Role,
} from '../core/roles.js';
import { PASSWORD_MIN, type UserRepository } from '../store/users.js';
import { withServerRepositories } from './server.js';
import { describeCommand } from './command-index.js';

/** Read a line from the terminal without echoing it. */
function promptHidden(question: string): Promise<string> {
  let muted = false;
  const output = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: true });
  return new Promise((resolve) => {
    rl.question(question, (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolve(answer);
    });
    muted = true;
  });
}

/** All of stdin; the password is its first line (so `echo pw | burrow user add` works). */
async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return text.split(/\r?\n/)[0] ?? '';
}

/**
 * A password for a new user or a new password: typed twice at a terminal, or the first line of stdin.
 * @example const password = await readPassword();
 */
export async function readPassword(): Promise<string> {
  if (!process.stdin.isTTY) return readStdin();
  const first = await promptHidden(`Password (at least ${PASSWORD_MIN} characters): `);
  const again = await promptHidden('Password again: ');
  if (first !== again) throw new Error('the two passwords differ; nothing was changed');
  return first;
}

type Flags = (opts: Record<string, string | undefined>) => Record<string, string | undefined>;

/** Open the store the options name, run `work` with its users, and close it again. */
async function withUsers<T>(
  opts: Record<string, string | undefined>,
  flags: Flags,
  work: (users: UserRepository) => Promise<T>,
): Promise<T> {
  return withServerRepositories(flags(opts), (repos) => work(repos.users));
}

/**
 * The owner, role and scopes of a key made by `burrow api-key create`: the account's (an
 * unlimited admin key) unless `--user` names a dashboard user, whose role the key carries or
 * narrows (`--role`); `--scope` limits it further.
 * @example const limits = await apiKeyLimits(repos.users, { user: 'ada', role: 'viewer', scopes: ['endpoints:read'] });
 */
export async function apiKeyLimits(
  users: UserRepository,
  opts: { user?: string | undefined; role?: string | undefined; scopes?: string[] | undefined },
): Promise<{ owner_id?: string; role: Role | null; scopes: Permission[] | null }> {
  const role = opts.role === undefined ? null : parseRole(opts.role, '--role');
  const scopes = opts.scopes === undefined ? null : parseScopes(opts.scopes, '--scope');
  if (opts.user === undefined) return { role, scopes };
  const owner = await users.getByName(opts.user);
  if (!owner) throw noSuchUser(opts.user);
  if (role !== null && !roleWithin(role, owner.role)) {
    throw new Error(
      `--role ${role} is wider than ${owner.name}'s role (${owner.role}): a key carries its owner's role or a narrower one`,
    );
  }
  return { owner_id: owner.id, role, scopes };
}

function noSuchUser(name: string): Error {
  return new Error(`no dashboard user is named ${quote(name)}; burrow user list shows the names`);
}

/** Said when a change leaves no admin: nobody can manage users from the dashboard or the API. */
async function warnWithoutAdmin(users: UserRepository): Promise<void> {
  if ((await users.countWithRole('admin')) === 0) {
    process.stderr.write(
      'No dashboard user is an admin now: give one the role with burrow user role <name> admin.\n',
    );
  }
}

const ROLE_HELP = `${ROLES.join(', ')}: admin does everything, operator manages tunnels, endpoints, edges, domains and policies (no users, no keys of others), viewer reads only`;

/**
 * `burrow user add|list|delete|passwd|role`: manage dashboard users directly in the database (for
 * the first user without the setup link, to recover from a lost password or a lost admin).
 * `storeOptions` adds --data-dir/--database; `flags` turns parsed options into config flags.
 * @example registerUserCommand(program, (cmd) => addServerOptions(cmd, ['data-dir', 'database']), collectFlags);
 */
export function registerUserCommand(
  program: Command,
  storeOptions: (cmd: Command) => Command,
  flags: Flags,
): void {
  const user = program.command('user').description(describeCommand('user'));
  storeOptions(
    user
      .command('add <name>')
      .description(
        'create a dashboard user; the password is read from stdin (prompted on a terminal)',
      )
      .option('--role <role>', `${ROLE_HELP} (default: admin for the first user, viewer after)`),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    // Checked before the password is asked for.
    const role = opts.role === undefined ? undefined : parseRole(opts.role, '--role');
    const password = await readPassword();
    // --role is the user's, not the server's (`burrow server --role`): kept out of the config.
    const storeOpts = { ...opts, role: undefined };
    const created = await withUsers(storeOpts, flags, (users) =>
      users.create(name, password, role),
    );
    process.stderr.write(
      `Created dashboard user ${created.name} (${created.id}) with the role ${created.role}.\n`,
    );
  });

  storeOptions(
    user
      .command('list')
      .description('list dashboard users: name, id, creation time and role, tab-separated'),
  ).action(async (opts: Record<string, string | undefined>) => {
    const all = await withUsers(opts, flags, (users) => users.list());
    if (all.length === 0)
      process.stderr.write('No dashboard users yet: add one with burrow user add.\n');
    // One user a line, name first, so `burrow user list | cut -f1` gives the names.
    // The role comes last, so scripts that read the first three columns keep working.
    for (const u of all) {
      process.stdout.write(`${u.name}\t${u.id}\t${u.created_at}\t${u.role}\n`);
    }
  });

  storeOptions(
    user
      .command('delete <name>')
      .description(
        'delete a dashboard user and end their sessions (their API keys stop working with them)',
      ),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    await withUsers(opts, flags, async (users) => {
      if (!(await users.deleteByName(name))) throw noSuchUser(name);
      process.stderr.write(`Deleted dashboard user ${name}.\n`);
      await warnWithoutAdmin(users);
    });
  });

  storeOptions(
    user
      .command('role <name> <role>')
      .description(
        `give a dashboard user another role (${ROLE_HELP}); it holds from their next request, for their sessions and API keys`,
      ),
  ).action(async (name: string, roleName: string, opts: Record<string, string | undefined>) => {
    const role = parseRole(roleName, '<role>');
    await withUsers(opts, flags, async (users) => {
      const found = await users.getByName(name);
      if (!found) throw noSuchUser(name);
      await users.setRole(found.id, role);
      process.stderr.write(`${name} now has the role ${role}.\n`);
      await warnWithoutAdmin(users);
    });
  });

  storeOptions(
    user
      .command('passwd <name>')
      .description(
        'set a new password for a dashboard user, read from stdin (prompted on a terminal); ends their sessions',
      ),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    const password = await readPassword();
    const changed = await withUsers(opts, flags, (users) => users.setPassword(name, password));
    if (!changed) throw noSuchUser(name);
    process.stderr.write(`Changed the password of ${name}; their sessions have ended.\n`);
  });
}
