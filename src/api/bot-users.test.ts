import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { BIDI, ZERO_WIDTH } from '../../test/support/text-fixtures.js';

describe.each(DATABASE_KINDS)('bot users API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  it('creates a bot user as in docs/api/bot-users.md: 201, active true by default', async () => {
    const res = await api.call('POST', '/bot_users', { name: 'new bot user from API' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^bot_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/bot_users/${res.body.id}`,
      name: 'new bot user from API',
      active: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
  });

  it('gets, updates, lists and deletes', async () => {
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'lifecycle' });
    expect((await api.call('GET', `/bot_users/${bot.id}`)).body).toEqual(bot);
    const patched = await api.call('PATCH', `/bot_users/${bot.id}`, {
      active: false,
      name: 'inactive bot user from API',
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      id: bot.id,
      active: false,
      name: 'inactive bot user from API',
    });
    const empty = await api.call('PATCH', `/bot_users/${bot.id}`, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(patched.body);
    const list = await api.call('GET', '/bot_users');
    expect(list.body.bot_users.map((b: { id: string }) => b.id)).toContain(bot.id);
    await expectDeletedForGood(api, `/bot_users/${bot.id}`);
  });

  it('refuses an empty name and a duplicate name', async () => {
    const empty = await api.call('POST', '/bot_users', { name: '  ' });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ error_code: 'ERR_NGROK_4109', details: { field: 'name' } });
    await api.call('POST', '/bot_users', { name: 'twin' });
    const dup = await api.call('POST', '/bot_users', { name: 'twin' });
    expect(dup.status).toBe(409);
    expect(dup.body.error_code).toBe('ERR_NGROK_4112');
  });

  it('limits name to 255 bytes of UTF-8 on create and PATCH (a 1 MiB name was stored)', async () => {
    const atLimit = await api.call('POST', '/bot_users', { name: 'é'.repeat(127) + 'a' });
    expect(atLimit.status).toBe(201);
    for (const name of ['é'.repeat(128), 'n'.repeat(256), 'n'.repeat(1024 * 1024 - 100)]) {
      const res = await api.call('POST', '/bot_users', { name });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_215',
        msg: 'name: must be at most 255 bytes of UTF-8',
        details: { field: 'name' },
      });
    }
    const patch = await api.call('PATCH', `/bot_users/${atLimit.body.id}`, {
      name: 'n'.repeat(256),
    });
    expect(patch.status).toBe(400);
    expect(patch.body.msg).toBe('name: must be at most 255 bytes of UTF-8');
  });

  it('refuses NUL, controls, bidirectional overrides and zero-width characters in names', async () => {
    const refused = [
      ...['\u0000', '\u0007', '\t', '\n', '\r', '\u007F', '\u0085'],
      ...BIDI,
      ...ZERO_WIDTH,
    ];
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'to be renamed' });
    for (const ch of refused) {
      const code = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
      for (const res of [
        await api.call('POST', '/bot_users', { name: `evil${ch}name` }),
        await api.call('PATCH', `/bot_users/${bot.id}`, { name: `evil${ch}name` }),
      ]) {
        expect(res.status).toBe(400);
        expect(res.body.error_code).toBe('ERR_NGROK_215');
        expect(res.body.details.field).toBe('name');
        expect(res.body.msg).toMatch(
          /^name: must not contain control, bidirectional-formatting or zero-width characters: found /,
        );
        expect(res.body.msg).toContain(`found ${code} (`);
        expect(res.body.msg).toContain('at character 5');
      }
    }
    const names = (await api.call('GET', '/bot_users')).body.bot_users.map(
      (b: { name: string }) => b.name,
    ) as string[];
    expect(names.filter((n) => n.startsWith('evil'))).toEqual([]);
    expect((await api.call('GET', `/bot_users/${bot.id}`)).body.name).toBe('to be renamed');
  });

  it('accepts names in any script, and quotes a taken name only in short form', async () => {
    const name = 'Ünïcödé 東京 bots 🤖 ' + 'x'.repeat(200);
    expect((await api.call('POST', '/bot_users', { name })).status).toBe(201);
    const dup = await api.call('POST', '/bot_users', { name });
    expect(dup.status).toBe(409);
    expect(dup.body.msg).toContain(`'${[...name].slice(0, 60).join('')}…'`);
    expect(dup.body.msg).not.toContain('x'.repeat(100));
  });

  it('refuses a missing name and a wrong type, naming the field', async () => {
    const missing = await api.call('POST', '/bot_users', {});
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error_code: 'ERR_NGROK_215', msg: 'name: is required' });
    const wrong = await api.call('POST', '/bot_users', { name: 'x', active: 'yes' });
    expect(wrong.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'active: must be a boolean',
    });
  });

  it("a bot user's API key ends with its owner: refused once deactivated, and it may not re-activate its owner", async () => {
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'ci bot' });
    const made = await api.call('POST', '/api_keys', { owner_id: bot.id });
    const asBot = { authorization: `Bearer ${made.body.token as string}` };
    expect((await api.call('GET', '/bot_users', undefined, asBot)).status).toBe(200);
    // While active, the bot's key may still not touch its own owner's active field.
    const self = await api.call('PATCH', `/bot_users/${bot.id}`, { active: false }, asBot);
    expect(self.status).toBe(403);
    expect(self.body.error_code).toBe('ERR_BURROW_API_KEY_OWN_OWNER');
    expect((await api.call('PATCH', `/bot_users/${bot.id}`, { active: false })).status).toBe(200);
    for (const [method, path, body] of [
      ['GET', '/api_keys', undefined],
      ['PATCH', `/bot_users/${bot.id}`, { active: true }],
      ['POST', '/api_keys', {}],
    ] as const) {
      const res = await api.call(method, path, body, asBot);
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body.error_code).toBe('ERR_BURROW_API_KEY_OWNER_INACTIVE');
      expect(res.body.msg).toContain(`bot user ${bot.id}, is deactivated`);
    }
    expect((await api.call('GET', `/bot_users/${bot.id}`)).body.active).toBe(false);
    // The administrator re-activates it: the same key works again.
    await api.call('PATCH', `/bot_users/${bot.id}`, { active: true });
    expect((await api.call('GET', '/bot_users', undefined, asBot)).status).toBe(200);
  });

  it("a bot user's key makes keys owned by that bot only, which end with it", async () => {
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'minting bot' });
    const made = await api.call('POST', '/api_keys', { owner_id: bot.id });
    const asBot = { authorization: `Bearer ${made.body.token as string}` };
    const account = (await api.call('POST', '/api_keys', {})).body.owner_id as string;
    const forAccount = await api.call('POST', '/api_keys', { owner_id: account }, asBot);
    expect(forAccount.status).toBe(403);
    expect(forAccount.body.error_code).toBe('ERR_BURROW_API_KEY_OWN_OWNER');
    const minted = [
      await api.call('POST', '/api_keys', undefined, asBot),
      await api.call('POST', '/api_keys', { description: 'x' }, asBot),
    ];
    for (const res of minted) {
      expect(res.status).toBe(201);
      expect(res.body.owner_id).toBe(bot.id);
    }
    await api.call('PATCH', `/bot_users/${bot.id}`, { active: false });
    const asMinted = { authorization: `Bearer ${minted[0]!.body.token as string}` };
    expect((await api.call('GET', '/api_keys', undefined, asMinted)).status).toBe(401);
  });

  it("a bot user's key whose bot row is gone is refused as deleted", async () => {
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'vanished bot' });
    const made = await api.call('POST', '/api_keys', { owner_id: bot.id });
    const asBot = { authorization: `Bearer ${made.body.token as string}` };
    expect((await api.call('GET', '/bot_users', undefined, asBot)).status).toBe(200);
    // The API refuses to delete a bot user that owns keys: only a hand edit of the store does it.
    await api.store.db.deleteFrom('bot_users').where('id', '=', bot.id).execute();
    const res = await api.call('GET', '/bot_users', undefined, asBot);
    expect(res.status).toBe(401);
    expect(res.body.error_code).toBe('ERR_BURROW_API_KEY_OWNER_INACTIVE');
    expect(res.body.msg).toContain(`bot user ${bot.id}, has been deleted`);
  });

  it("a deleted dashboard user's API key is refused", async () => {
    const user = await api.repos.users.create('leaver', 'a long enough password');
    const { token } = await api.repos.apiKeys.create({ owner_id: user.id });
    const asUser = { authorization: `Bearer ${token!}` };
    expect((await api.call('GET', '/bot_users', undefined, asUser)).status).toBe(200);
    await api.repos.users.deleteByName('leaver');
    const res = await api.call('GET', '/bot_users', undefined, asUser);
    expect(res.status).toBe(401);
    expect(res.body.error_code).toBe('ERR_BURROW_API_KEY_OWNER_INACTIVE');
  });
});
