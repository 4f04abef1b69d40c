import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  DATABASE_KINDS,
  PG_ADMIN_URL,
  type TestDatabase,
} from './support/stores.js';
import { apiCall, listAll, type BurstReply } from './support/api-burst.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';

/** An IP policy as the list returns it. */
interface Policy {
  id: string;
  description: string;
}

/**
 * The store failing under the server: a SIGKILL mid-burst, PostgreSQL dropping every connection,
 * SQLite's disk filling up. Real `burrow server` processes, calls over HTTP.
 */
describe.each(DATABASE_KINDS)('SIGKILL during a burst of API writes (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('keeps every write that got its 2xx, and its audit event', async () => {
    server = await startBurrowServer(db, { args: ['--api-rate-limit', '0'] });
    const key = await createApiKey(db);
    const url = server.url;
    const N = 300;
    const acked: Policy[] = [];
    let killed = false;
    const exit = once(server.process, 'exit');
    const writes = Array.from({ length: N }, async (_, i) => {
      const res = await apiCall(url, key, 'POST', '/ip_policies', { description: `burst-${i}` });
      if (res.status === 201) acked.push({ id: res.body.id, description: res.body.description });
      // Kill early in the burst, once a tenth of it is acknowledged: many writes are then in
      // flight (some committed, their reply lost), which is the case under test.
      if (!killed && acked.length >= N / 10) {
        killed = true;
        server!.process.kill('SIGKILL');
      }
      return res;
    });
    const replies = await Promise.all(writes);
    await exit;
    expect(killed).toBe(true);
    const lost = replies.filter((r) => r.status === 0).length;
    expect(lost, 'the kill landed mid-burst').toBeGreaterThan(0);
    expect(replies.every((r) => r.status === 201 || r.status === 0)).toBe(true);

    server = await startBurrowServer(db);
    const stored = new Map(
      (await listAll<Policy>(server.url, key, '/ip_policies', 'ip_policies')).map((p) => [
        p.id,
        p.description,
      ]),
    );
    for (const p of acked) expect(stored.get(p.id), p.id).toBe(p.description);
    // Writes whose reply was lost may or may not be there, but nothing else is.
    expect(stored.size).toBeLessThanOrEqual(N);
    const audited = new Set(
      (
        await listAll<{ resource_id: string }>(server.url, key, '/audit_events', 'audit_events')
      ).map((e) => e.resource_id),
    );
    for (const p of acked) expect(audited.has(p.id), `audit event of ${p.id}`).toBe(true);
    expect((await apiCall(server.url, key, 'POST', '/ip_policies', {})).status).toBe(201);
  }, 90_000);
});

describe('PostgreSQL drops every connection while requests are served', () => {
  let db: TestDatabase;
  let server: BurrowServer | undefined;
  let admin: pg.Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await server?.stop();
    await db?.drop();
  });

  it('answers 503 during, serves fully after, and leaves no half-written resource', async () => {
    // The burst is faster than the default per-key rate limit; 429s are not what is tested here.
    server = await startBurrowServer(db, { args: ['--api-rate-limit', '0'] });
    const key = await createApiKey(db);
    const url = server.url;
    const dbName = new URL(db.database).pathname.slice(1);
    const policy = await apiCall(url, key, 'POST', '/ip_policies', { description: 'rules' });
    expect(policy.status).toBe(201);

    const replies: BurstReply[] = [];
    const ackedRules: string[] = [];
    let stop = false;
    let terminated = 0;
    // Ten writers: IP policies (with a rule each) and rules on the shared policy.
    const writers = Array.from({ length: 10 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const res =
          w % 2 === 0
            ? await apiCall(url, key, 'POST', '/ip_policies', { description: `pg-${w}-${i}` })
            : await apiCall(url, key, 'POST', '/ip_policy_rules', {
                ip_policy_id: policy.body.id,
                cidr: `10.${w}.${i % 256}.0/24`,
                action: 'deny',
              });
        replies.push(res);
        if (res.status === 201 && w % 2 === 1) ackedRules.push(res.body.id as string);
      }
    });
    const killer = (async () => {
      for (let round = 0; round < 8; round++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const res = await admin!.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [dbName],
        );
        terminated += res.rowCount ?? 0;
      }
      stop = true;
    })();
    await Promise.all([killer, ...writers]);

    expect(terminated).toBeGreaterThan(0);
    const failed = replies.filter((r) => r.status !== 201);
    for (const r of failed) {
      expect(
        r.status,
        `${JSON.stringify(r.body)}; server stderr: ${server.stderr().slice(-3000)}`,
      ).toBe(503);
      expect(r.body).toMatchObject({ error_code: 'ERR_BURROW_STORE_UNAVAILABLE' });
    }
    expect(server.process.exitCode).toBeNull();

    // Full service after: twenty writes in a row, every one 201.
    for (let i = 0; i < 20; i++) {
      const res = await apiCall(url, key, 'POST', '/ip_policies', { description: `after-${i}` });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    // Nothing half-written: every acknowledged rule is there, every rule has its policy, and
    // every policy reads back whole.
    const rules = await listAll<{ id: string; ip_policy: { id: string } }>(
      url,
      key,
      '/ip_policy_rules',
      'ip_policy_rules',
    );
    const ruleIds = new Set(rules.map((r) => r.id));
    for (const id of ackedRules) expect(ruleIds.has(id), id).toBe(true);
    const policies = await listAll<Policy>(url, key, '/ip_policies', 'ip_policies');
    const policyIds = new Set(policies.map((p) => p.id));
    for (const r of rules) expect(policyIds.has(r.ip_policy.id)).toBe(true);
    for (const p of policies) expect(p.description).toMatch(/^(rules|pg-\d+-\d+|after-\d+)$/);
    console.info(
      `pg terminate: ${terminated} connections cut, ${replies.length} writes, ${failed.length} answered 503`,
    );
  }, 90_000);
});

/** True when this process may mount a tmpfs (root in a namespace that allows it). */
function canMountTmpfs(dir: string): boolean {
  try {
    mkdirSync(dir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Fill the file system holding `path` until it refuses (ENOSPC). */
function fillDisk(path: string): void {
  const fd = openSync(path, 'w');
  try {
    for (const size of [1024 * 1024, 64 * 1024, 4096, 512]) {
      const chunk = Buffer.alloc(size, 0x7a);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

describe('SQLite data disk full', () => {
  let db: TestDatabase;
  let server: BurrowServer | undefined;
  let mountDir = '';
  let mounted = false;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    mountDir = join(db.dataDir, 'disk');
    if (!canMountTmpfs(mountDir)) return;
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', mountDir]);
    mounted = true;
  });
  afterAll(async () => {
    await server?.stop();
    if (mounted) execFileSync('umount', [mountDir]);
    await db?.drop();
  });

  it('answers 503 with a message, recovers when space returns, and the file stays sound', async (ctx) => {
    if (!mounted) ctx.skip();
    const data = { database: '', dataDir: mountDir };
    const key = await createApiKey(data);
    server = await startBurrowServer(data);
    const url = server.url;
    const filler = join(mountDir, 'filler');
    fillDisk(filler);

    const acked: string[] = [];
    let refusal: BurstReply | undefined;
    for (let i = 0; i < 500 && refusal === undefined; i++) {
      const res = await apiCall(url, key, 'POST', '/ip_policies', {
        description: `full-${i}`,
        metadata: 'm'.repeat(4000),
      });
      if (res.status === 201) acked.push(res.body.id as string);
      else refusal = res;
    }
    expect(refusal, 'a write was refused once the disk was full').toBeDefined();
    expect(refusal!.status, JSON.stringify(refusal!.body)).toBe(503);
    expect(refusal!.body).toMatchObject({ error_code: 'ERR_BURROW_STORE_FULL' });
    expect(refusal!.body.msg).toMatch(/disk is full/);
    // Reads still work while the disk is full.
    expect((await apiCall(url, key, 'GET', '/ip_policies?limit=1')).status).toBe(200);

    rmSync(filler);
    const after = await apiCall(url, key, 'POST', '/ip_policies', { description: 'space back' });
    expect(after.status, JSON.stringify(after.body)).toBe(201);
    acked.push(after.body.id as string);

    expect(await server.stop()).toBe(0);
    server = undefined;
    const sqlite = new SqliteDatabase(join(mountDir, 'burrow.db'), { readonly: true });
    try {
      expect(sqlite.pragma('integrity_check', { simple: true })).toBe('ok');
      const ids = new Set(
        (sqlite.prepare('SELECT id FROM ip_policies').all() as { id: string }[]).map((r) => r.id),
      );
      for (const id of acked) expect(ids.has(id), id).toBe(true);
    } finally {
      sqlite.close();
    }
    console.info(`disk full: ${acked.length - 1} writes before the first 503`);
  }, 90_000);
});
