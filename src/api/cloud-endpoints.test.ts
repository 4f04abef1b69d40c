import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const customResponse = JSON.stringify({
  on_http_request: [{ actions: [{ type: 'custom-response', config: { body: 'hi' } }] }],
});

describe.each(DATABASE_KINDS)('cloud endpoints API (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
    expect(
      (await api.call('POST', '/reserved_domains', { domain: 'app.example.com' })).status,
    ).toBe(201);
    expect(
      (await api.call('POST', '/reserved_domains', { domain: '*.wild.example.com' })).status,
    ).toBe(201);
  });
  afterAll(async () => api.close());

  const create = (body: unknown) => api.call('POST', '/endpoints', body);

  it('creates, gets, lists, updates and deletes a cloud endpoint', async () => {
    const res = await create({
      type: 'cloud',
      url: 'https://app.example.com',
      traffic_policy: customResponse,
      description: 'front',
      metadata: '{"team":"web"}',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const id = res.body.id as string;
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^ep_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/endpoints/${id}`,
      type: 'cloud',
      url: 'https://app.example.com',
      proto: 'https',
      host: 'app.example.com',
      port: 443,
      bindings: ['public'],
      pooling_enabled: false,
      traffic_policy: customResponse,
      description: 'front',
      metadata: '{"team":"web"}',
      tunnel: null,
      tunnel_session: null,
    });
    expect((await api.call('GET', `/endpoints/${id}`)).body).toMatchObject({ id, type: 'cloud' });
    const listed = await api.call('GET', '/endpoints');
    expect(listed.body.endpoints.map((e: { id: string }) => e.id)).toContain(id);
    const patched = await api.call('PATCH', `/endpoints/${id}`, {
      id,
      description: 'changed',
      pooling_enabled: true,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      description: 'changed',
      pooling_enabled: true,
      url: 'https://app.example.com',
    });
    const mismatch = await api.call('PATCH', `/endpoints/${id}`, {
      id: 'ep_other',
      description: 'x',
    });
    expect(mismatch.status).toBe(400);
    const dup = await create({ url: 'https://app.example.com' });
    expect(dup.status).toBe(409);
    expect((await api.call('DELETE', `/endpoints/${id}`)).status).toBe(204);
    expect((await api.call('GET', `/endpoints/${id}`)).status).toBe(404);
    expect((await api.call('DELETE', `/endpoints/${id}`)).status).toBe(404);
  });

  it('takes wildcards, internal URLs and names under the base domain', async () => {
    const wild = await create({ url: 'https://*.wild.example.com' });
    expect(wild.status, JSON.stringify(wild.body)).toBe(201);
    const internal = await create({ url: 'https://api.internal' });
    expect(internal.body).toMatchObject({ bindings: ['internal'], type: 'cloud' });
    const base = await create({ url: 'https://front.burrow.test' });
    expect(base.status).toBe(201);
  });

  it('refuses bad input, naming the field', async () => {
    const cases: Array<[unknown, number, string, RegExp]> = [
      [{ url: 'https://nope.example.org' }, 400, 'ERR_NGROK_319', /not reserved/],
      [
        { url: 'https://app.example.com', bindings: ['internal'] },
        400,
        'ERR_BURROW_INTERNAL_NAME',
        /must end in '\.internal'/,
      ],
      [
        { url: 'https://x.internal', bindings: ['public'] },
        400,
        'ERR_NGROK_215',
        /internal endpoint/,
      ],
      [{ url: 'tcp://tcp.burrow.test:20999' }, 400, 'ERR_NGROK_319', /not reserved/],
      [{ url: 'ftp://app.example.com' }, 400, 'ERR_NGROK_215', /scheme/],
      [
        { url: 'https://app.example.com', type: 'ephemeral' },
        400,
        'ERR_NGROK_215',
        /must be "cloud"/,
      ],
      [
        {
          url: 'https://app.example.com',
          traffic_policy: JSON.stringify({
            on_http_request: [
              { actions: [{ type: 'forward-internal', config: { url: 'https://example.com' } }] },
            ],
          }),
        },
        400,
        'ERR_NGROK_2204',
        /is public/,
      ],
      [{ url: 'https://app.example.com', bogus: 1 }, 400, 'ERR_NGROK_214', /bogus/],
    ];
    for (const [body, status, code, msg] of cases) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.error_code, JSON.stringify(res.body)).toBe(code);
      expect(res.body.msg).toMatch(msg);
    }
  });
});
