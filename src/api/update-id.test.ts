import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';

describe('updates with the id in the body, as the API reference lists it', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi('sqlite');
  });
  afterAll(async () => {
    await api.close();
  });

  it.each([
    ['bot user', '/bot_users', { name: 'bot-for-id' }, { name: 'renamed' }],
    ['IP policy', '/ip_policies', { description: 'x' }, { description: 'y' }],
    ['TCP edge', '/edges/tcp', { description: 'x' }, { description: 'y' }],
  ])('accepts the same id in a %s PATCH body', async (_name, path, create, patch) => {
    const created = await api.call('POST', path, create);
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const updated = await api.call('PATCH', `${path}/${id}`, { id, ...patch });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ id, ...patch });
  });

  it('refuses another id in the body, naming the field, and changes nothing', async () => {
    const created = await api.call('POST', '/ip_policies', { description: 'keep' });
    const res = await api.call('PATCH', `/ip_policies/${created.body.id}`, {
      id: 'ipp_someoneelse',
      description: 'changed',
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_215', details: { field: 'id' } });
    expect((await api.call('GET', `/ip_policies/${created.body.id}`)).body.description).toBe(
      'keep',
    );
  });
});
