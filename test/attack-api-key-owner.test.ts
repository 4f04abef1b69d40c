import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CurlApi } from './support/curl.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * Issue 27 item 5, as the attack, on two `burrow server` processes over one PostgreSQL (two nodes
 * of a cluster): an administrator deactivates a bot user through node A; the bot's API key, used
 * on node B at once, tries what the issue reports it did (re-activate its own bot user, mint a
 * key owned by the account, delete the administrator's key). Every attempt is refused, and
 * nothing changed.
 */

describe("a deactivated bot user's API key has no rights, on any node", () => {
  let db: TestDatabase;
  let nodeA: BurrowServer;
  let nodeB: BurrowServer;
  let admin: CurlApi;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    nodeA = await startBurrowServer(db);
    nodeB = await startBurrowServer(db);
    admin = new CurlApi(nodeA.url, await createApiKey(db));
  }, 60_000);

  afterAll(async () => {
    await nodeA?.stop();
    await nodeB?.stop();
    await db?.drop();
  });

  it('refuses the key at once after PATCH active:false, and the key cannot undo it', async () => {
    const bot = (await admin.post('/bot_users', { name: 'ci-bot' })).body as { id: string };
    const botKey = (await admin.post('/api_keys', { owner_id: bot.id })).body as { token: string };
    const adminKeys = (await admin.get('/api_keys')).body.keys as Array<{ id: string }>;
    const asBot = new CurlApi(nodeB.url, botKey.token);
    expect((await asBot.get('/bot_users')).status).toBe(200);

    expect((await admin.patch(`/bot_users/${bot.id}`, { active: false })).status).toBe(200);

    const attempts = [
      await asBot.patch(`/bot_users/${bot.id}`, { active: true }),
      await asBot.post('/api_keys', { description: 'minted by the bot' }),
      ...(await Promise.all(adminKeys.map((k) => asBot.delete(`/api_keys/${k.id}`)))),
      await new CurlApi(nodeA.url, botKey.token).get('/api_keys'),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(401);
      expect(res.body.error_code).toBe('ERR_BURROW_API_KEY_OWNER_INACTIVE');
      expect(res.body.msg).toContain(`bot user ${bot.id}, is deactivated`);
    }
    expect((await admin.get(`/bot_users/${bot.id}`)).body.active).toBe(false);
    const keysAfter = (await admin.get('/api_keys')).body.keys as Array<{ description: string }>;
    expect(keysAfter.map((k) => k.description)).not.toContain('minted by the bot');
    expect(keysAfter.length).toBe(adminKeys.length);
  });

  it("an active bot user's key may not change its own owner's active field (403 with a code)", async () => {
    const bot = (await admin.post('/bot_users', { name: 'deploy-bot' })).body as { id: string };
    const botKey = (await admin.post('/api_keys', { owner_id: bot.id })).body as { token: string };
    const res = await new CurlApi(nodeB.url, botKey.token).patch(`/bot_users/${bot.id}`, {
      active: false,
    });
    expect(res.status).toBe(403);
    expect(res.body.error_code).toBe('ERR_BURROW_API_KEY_OWN_OWNER');
  });
});
