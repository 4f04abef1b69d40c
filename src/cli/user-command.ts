import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import type { Command } from 'commander';
import { loadServerConfig } from '../core/config.js';
import { quote } from '../core/quote.js';
import { openStore } from '../store/index.js';
import { PASSWORD_MIN, type UserRepository } from '../store/users.js';
import { serverRepositories } from './server.js';
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
  const config = loadServerConfig(flags(opts));
  const store = await openStore({ database: config.database, dataDir: config.dataDir });
  try {
    return await work(serverRepositories(store, config).users);
  } finally {
    await store.close();
  }
}

function noSuchUser(name: string): Error {
  return new Error(`no dashboard user is named ${quote(name)}; burrow user list shows the names`);
}

/**
 * `burrow user add|list|delete|passwd`: manage dashboard users directly in the database (for the
 * first user without the setup link, and to recover from a lost password).
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
      ),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    const password = await readPassword();
    const created = await withUsers(opts, flags, (users) => users.create(name, password));
    process.stderr.write(`Created dashboard user ${created.name} (${created.id}).\n`);
  });

  storeOptions(
    user.command('list').description('list dashboard users: name, id and creation time'),
  ).action(async (opts: Record<string, string | undefined>) => {
    const all = await withUsers(opts, flags, (users) => users.list());
    if (all.length === 0)
      process.stderr.write('No dashboard users yet: add one with burrow user add.\n');
    // One user a line, name first, so `burrow user list | cut -f1` gives the names.
    for (const u of all) process.stdout.write(`${u.name}\t${u.id}\t${u.created_at}\n`);
  });

  storeOptions(
    user
      .command('delete <name>')
      .description('delete a dashboard user and end their sessions (their API keys stay)'),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    const deleted = await withUsers(opts, flags, (users) => users.deleteByName(name));
    if (!deleted) throw noSuchUser(name);
    process.stderr.write(`Deleted dashboard user ${name}.\n`);
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
