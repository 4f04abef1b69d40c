import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../test-support/api.js';
import { DATABASE_KINDS } from '../test-support/stores.js';

describe.each(DATABASE_KINDS)('bot users API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  it('creates a bot user as in interface.md: 201, active true by default', async () => {
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
    const del = await api.call('DELETE', `/bot_users/${bot.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    const gone = await api.call('GET', `/bot_users/${bot.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });
    expect((await api.call('DELETE', `/bot_users/${bot.id}`)).status).toBe(404);
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
});
