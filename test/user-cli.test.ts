import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../src/store/index.js';
import { UserRepository } from '../src/store/users.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { databaseArgs, runBurrow } from './support/server-process.js';

/**
 * `burrow user add|list|delete|passwd` against a real data folder, the way an operator runs them:
 * passwords on stdin (runBurrow's `input`).
 */

describe('burrow user', () => {
  let db: TestDatabase;
  const args = () => databaseArgs(db);

  /** Whether `password` signs `name` in, checked in the store the commands changed. */
  const signsIn = async (name: string, password: string) => {
    const store = await openStore({ database: db.database, dataDir: db.dataDir });
    try {
      return (await new UserRepository(store.db).authenticate(name, password)) !== undefined;
    } finally {
      await store.close();
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('lists nobody at first, then the users added, one a line', async () => {
    const empty = await runBurrow(['user', 'list', ...args()]);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toBe('');
    expect(empty.stderr).toContain('No dashboard users yet');

    for (const name of ['ada', 'grace']) {
      const added = await runBurrow(['user', 'add', name, ...args()], undefined, {
        input: 'first password\n',
      });
      expect(added.code, added.stderr).toBe(0);
    }
    const listed = await runBurrow(['user', 'list', ...args()]);
    expect(listed.code).toBe(0);
    const rows = listed.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(rows.map((r) => r[0]).sort()).toEqual(['ada', 'grace']);
    expect(rows[0]![1]).toMatch(/^usr_/);
  });

  it('passwd sets a new password read from stdin; the old one stops working', async () => {
    const res = await runBurrow(['user', 'passwd', 'ada', ...args()], undefined, {
      input: 'second password\n',
    });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('Changed the password of ada');
    expect(await signsIn('ada', 'second password')).toBe(true);
    expect(await signsIn('ada', 'first password')).toBe(false);

    const short = await runBurrow(['user', 'passwd', 'ada', ...args()], undefined, {
      input: 'short\n',
    });
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('a password has 8 to');
    const unknown = await runBurrow(['user', 'passwd', 'nobody', ...args()], undefined, {
      input: 'long enough\n',
    });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no dashboard user is named 'nobody'");
  });

  it('delete removes a user; deleting an unknown one fails clearly', async () => {
    const res = await runBurrow(['user', 'delete', 'grace', ...args()]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('Deleted dashboard user grace');
    const listed = await runBurrow(['user', 'list', ...args()]);
    expect(
      listed.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[0]),
    ).toEqual(['ada']);
    expect(await signsIn('grace', 'first password')).toBe(false);

    const again = await runBurrow(['user', 'delete', 'grace', ...args()]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("no dashboard user is named 'grace'");
  });
});
