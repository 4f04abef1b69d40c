import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import type { Command } from 'commander';
import { loadServerConfig } from '../core/config.js';
import { openStore } from '../store/index.js';
import { PASSWORD_MIN } from '../store/users.js';
import { serverRepositories } from './server.js';

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
 * The password for a new user: typed twice at a terminal, or the first line of stdin.
 * @example const password = await readPassword();
 */
export async function readPassword(): Promise<string> {
  if (!process.stdin.isTTY) return readStdin();
  const first = await promptHidden(`Password (at least ${PASSWORD_MIN} characters): `);
  const again = await promptHidden('Password again: ');
  if (first !== again) throw new Error('the two passwords differ; nothing was created');
  return first;
}

/**
 * `burrow user add <name>`: create a dashboard user directly in the database.
 * `storeOptions` adds --data-dir/--database; `flags` turns parsed options into config flags.
 * @example registerUserCommand(program, (cmd) => addServerOptions(cmd, ['data-dir', 'database']), collectFlags);
 */
export function registerUserCommand(
  program: Command,
  storeOptions: (cmd: Command) => Command,
  flags: (opts: Record<string, string | undefined>) => Record<string, string | undefined>,
): void {
  const user = program.command('user').description('manage dashboard users (people who sign in)');
  storeOptions(
    user
      .command('add <name>')
      .description(
        'create a dashboard user; the password is read from stdin (prompted on a terminal)',
      ),
  ).action(async (name: string, opts: Record<string, string | undefined>) => {
    const config = loadServerConfig(flags(opts));
    const password = await readPassword();
    const store = await openStore({ database: config.database, dataDir: config.dataDir });
    try {
      const created = await serverRepositories(store, config).users.create(name, password);
      process.stderr.write(`Created dashboard user ${created.name} (${created.id}).\n`);
    } finally {
      await store.close();
    }
  });
}
