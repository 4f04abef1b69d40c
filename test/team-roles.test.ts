import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey,
  databaseArgs,
  runBurrow,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * Issue 33, roles as a team's administrator sets them up: users added with `burrow user add
 * --role`, their keys made with `burrow api-key create --user`, a running server that holds each
 * key to its owner's role, and a role changed on the command line that holds at the next request.
 */

describe('team roles through the CLI and a running server', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let adminKey: string;
  const args = () => databaseArgs(db);

  const call = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        'service-version': '2',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };

  /** The token `burrow api-key create extra…` prints. */
  const keyFor = async (...extra: string[]) => {
    const res = await runBurrow(['api-key', 'create', ...args(), ...extra]);
    expect(res.code, res.stderr).toBe(0);
    return res.stdout.trim();
  };

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    adminKey = await createApiKey(db);
    server = await startBurrowServer(db);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('adds users with roles; the first is admin, a bad role is refused before the password', async () => {
    const first = await runBurrow(['user', 'add', 'ada', ...args()], undefined, {
      input: 'admin password\n',
    });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('with the role admin');
    const op = await runBurrow(
      ['user', 'add', 'olga', '--role', 'operator', ...args()],
      undefined,
      { input: 'operator password\n' },
    );
    expect(op.stderr).toContain('with the role operator');
    const bad = await runBurrow(['user', 'add', 'eve', '--role', 'root', ...args()], undefined, {
      input: 'whatever password\n',
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--role: must be one of admin, operator, viewer');
    const list = await runBurrow(['user', 'list', ...args()]);
    const rows = list.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(rows.map((r) => [r[0], r[3]])).toEqual([
      ['ada', 'admin'],
      ['olga', 'operator'],
    ]);
  });

  it("holds an operator's key to the role, and a new role at the next request", async () => {
    const wider = await runBurrow([
      'api-key',
      'create',
      ...args(),
      '--user',
      'olga',
      '--role',
      'admin',
    ]);
    expect(wider.code).toBe(1);
    expect(wider.stderr).toContain("wider than olga's role (operator)");
    const key = await keyFor('--user', 'olga');
    const made = await call(key, 'POST', '/ip_policies', { description: 'olga made this' });
    expect(made.status).toBe(201);
    const bot = await call(key, 'POST', '/bot_users', { name: 'ci' });
    expect(bot.status).toBe(403);
    expect(bot.body).toMatchObject({
      error_code: 'ERR_BURROW_PERMISSION_DENIED',
      details: { required: 'bot_users:write', role: 'operator' },
    });
    expect((await call(key, 'GET', '/users')).status).toBe(403);
    // The audit trail says which key, and whose.
    const audit = await call(adminKey, 'GET', '/audit_events?limit=1');
    const [event] = audit.body.audit_events as Array<{ actor: { owner_id: string } }>;
    const users = await call(adminKey, 'GET', '/users');
    const olga = (users.body.users as Array<{ id: string; name: string }>).find(
      (u) => u.name === 'olga',
    );
    expect(event!.actor.owner_id).toBe(olga!.id);

    const demoted = await runBurrow(['user', 'role', 'olga', 'viewer', ...args()]);
    expect(demoted.code, demoted.stderr).toBe(0);
    expect(demoted.stderr).toContain('olga now has the role viewer');
    const after = await call(key, 'DELETE', `/ip_policies/${String(made.body.id)}`);
    expect(after.status).toBe(403);
    expect((await call(key, 'GET', '/ip_policies')).status).toBe(200);
  });

  it('makes scoped keys on the command line', async () => {
    const key = await keyFor('--scope', 'reserved_domains:read', '--scope', 'endpoints:write');
    expect((await call(key, 'GET', '/reserved_domains')).status).toBe(200);
    expect((await call(key, 'GET', '/endpoints')).status).toBe(200);
    const refused = await call(key, 'GET', '/ip_policies');
    expect(refused.status).toBe(403);
    expect(String(refused.body.msg)).toContain('endpoints:write, reserved_domains:read');
    const bad = await runBurrow(['api-key', 'create', ...args(), '--scope', 'everything']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--scope[0]');
  });

  it('warns when a change leaves no admin', async () => {
    const res = await runBurrow(['user', 'role', 'ada', 'operator', ...args()]);
    expect(res.code).toBe(0);
    expect(res.stderr).toContain('No dashboard user is an admin now');
    await runBurrow(['user', 'role', 'ada', 'admin', ...args()]);
  });
});
