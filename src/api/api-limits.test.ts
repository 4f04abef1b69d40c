import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';

/** `--api-max-body-bytes` and `--api-max-json-depth`: refused in the API's error shape, counted. */
describe('API body limits', () => {
  let api: TestApi;
  const refused: [string, string][] = [];
  beforeAll(async () => {
    api = await createTestApi('sqlite', {
      limits: { maxBodyBytes: 2048, maxJsonDepth: 4 },
      refused: (ip, limit) => refused.push([ip, limit]),
    });
  });
  afterAll(async () => api.close());

  it('413 for a body over the configured size, with the field and the rule; nothing stored', async () => {
    const res = await api.call('POST', '/bot_users', { name: 'x'.repeat(3000) });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({
      error_code: 'ERR_NGROK_212',
      status_code: 413,
      details: { field: 'body', rule: 'at most 2048 bytes' },
    });
    expect(res.body.msg).toContain('2048 bytes');
    expect(refused).toContainEqual([expect.any(String), 'api_body_bytes']);
    expect((await api.call('GET', '/bot_users')).body.bot_users).toHaveLength(0);
    // Under the limit: served as before.
    expect((await api.call('POST', '/bot_users', { name: 'small' })).status).toBe(201);
  });

  it('400 for JSON nested deeper than the configured depth, naming the field', async () => {
    const res = await api.call('POST', '/bot_users', {
      name: 'deep',
      extra: { a: { b: { c: {} } } },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      details: { field: 'extra.a.b.c' },
    });
    expect(res.body.msg).toMatch(/^extra\.a\.b\.c: nested deeper than 4 levels/);
    expect(refused.filter(([, l]) => l === 'api_json_depth')).toHaveLength(1);
    // At the depth: reaches schema validation (which refuses the unknown field on its own terms).
    const atDepth = await api.call('POST', '/bot_users', { name: 'ok', extra: { a: { b: {} } } });
    expect(atDepth.body.msg ?? '').not.toMatch(/nested deeper/);
    expect(refused.filter(([, l]) => l === 'api_json_depth')).toHaveLength(1);
  });
});
