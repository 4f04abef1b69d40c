import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('API conventions (%s)', (kind) => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi(kind);
  });
  afterAll(async () => api.close());

  describe('versioning', () => {
    it('refuses a missing version header with 400 ERR_NGROK_218', async () => {
      const res = await api.call('GET', '/bot_users', undefined, { 'service-version': undefined });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_218', status_code: 400 });
      expect(res.body.msg).toContain('Supported versions: 2');
    });

    it('refuses another version with 400 ERR_NGROK_217', async () => {
      const res = await api.call('GET', '/bot_users', undefined, { 'service-version': '3' });
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_217');
    });

    it('accepts Ngrok-Version as an alias', async () => {
      const res = await api.call('GET', '/bot_users', undefined, {
        'service-version': undefined,
        'ngrok-version': '2',
      });
      expect(res.status).toBe(200);
    });
  });

  describe('authentication', () => {
    it('refuses a missing key with 401 ERR_NGROK_200', async () => {
      const res = await api.call('GET', '/bot_users', undefined, { authorization: undefined });
      expect(res.status).toBe(401);
      expect(res.body.error_code).toBe('ERR_NGROK_200');
    });

    it('refuses a non-Bearer header with 401 ERR_NGROK_201', async () => {
      const res = await api.call('GET', '/bot_users', undefined, { authorization: 'Basic abc' });
      expect(res.status).toBe(401);
      expect(res.body.error_code).toBe('ERR_NGROK_201');
    });

    it('refuses an unknown, garbled or deleted key with 401 ERR_NGROK_203', async () => {
      const forged = api.key.slice(0, -4) + 'AAAA';
      for (const token of [forged, 'garbage', api.key + 'x']) {
        const res = await api.call('GET', '/bot_users', undefined, {
          authorization: `Bearer ${token}`,
        });
        expect(res.status).toBe(401);
        expect(res.body.error_code).toBe('ERR_NGROK_203');
      }
      const { body: extra } = await api.call('POST', '/api_keys', { description: 'short-lived' });
      expect(
        (await api.call('GET', '/bot_users', undefined, { authorization: `Bearer ${extra.token}` }))
          .status,
      ).toBe(200);
      expect((await api.call('DELETE', `/api_keys/${extra.id}`)).status).toBe(204);
      const after = await api.call('GET', '/bot_users', undefined, {
        authorization: `Bearer ${extra.token}`,
      });
      expect(after.status).toBe(401);
    });

    it('serves the OpenAPI document without key or version', async () => {
      const res = await api.call('GET', '/openapi.json', undefined, {
        authorization: undefined,
        'service-version': undefined,
      });
      expect(res.status).toBe(200);
      expect(res.body.openapi).toBe('3.1.0');
      expect(Object.keys(res.body.paths)).toEqual(
        expect.arrayContaining(['/bot_users', '/bot_users/{id}', '/api_keys']),
      );
    });
  });

  describe('errors', () => {
    it('carries the operation id in the body and the Operation-Id header', async () => {
      const res = await api.call('GET', '/bot_users/bot_doesnotexist');
      expect(res.status).toBe(404);
      expect(res.body).toEqual({
        status_code: 404,
        msg: 'Resource not found',
        details: { operation_id: res.headers['operation-id'] },
      });
      expect(res.headers['operation-id']).toMatch(/^op_[0-9A-Za-z]{27}$/);
    });

    it('answers an unknown route with 404 naming the path', async () => {
      const res = await api.call('GET', '/no_such_thing');
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({
        status_code: 404,
        msg: 'Not Found',
        details: { path: '/no_such_thing' },
      });
    });

    it('names an unknown body field (ERR_NGROK_214) and lists the supported ones', async () => {
      const res = await api.call('POST', '/bot_users', { name: 'x', colour: 'blue' });
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_214');
      expect(res.body.msg).toBe(
        "The parameter 'colour' is unknown. Supported fields are: name, active.",
      );
      expect(res.body.details.field).toBe('colour');
    });

    it('refuses malformed JSON with ERR_NGROK_213', async () => {
      const res = await api.call('POST', '/bot_users', '{"name": ');
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_213');
    });

    it('refuses a text/plain body with ERR_NGROK_216, even when it holds JSON', async () => {
      const res = await api.call('POST', '/bot_users', '{"name":"zz"}', {
        'content-type': 'text/plain',
      });
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_216');
    });

    it('refuses a body that is not JSON with ERR_NGROK_216', async () => {
      const res = await api.call('POST', '/bot_users', 'name=x', {
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_216');
    });

    it('limits description to 255 bytes of UTF-8, not characters', async () => {
      const ok = await api.call('POST', '/api_keys', { description: 'é'.repeat(127) + 'a' });
      expect(ok.status).toBe(201);
      const tooLong = await api.call('POST', '/api_keys', { description: 'é'.repeat(128) });
      expect(tooLong.status).toBe(400);
      expect(tooLong.body).toMatchObject({
        error_code: 'ERR_NGROK_7073',
        msg: 'description: must be at most 255 bytes of UTF-8',
      });
      const meta = await api.call('POST', '/api_keys', { metadata: '€'.repeat(1366) }); // 4098 bytes
      expect(meta.status).toBe(400);
      expect(meta.body.error_code).toBe('ERR_NGROK_100');
    });
    it('lets descriptions break lines and indent, and refuses other controls, bidi and zero-width', async () => {
      const ok = await api.call('POST', '/ip_policies', { description: 'office\n\tsecond line' });
      expect(ok.status).toBe(201);
      expect(ok.body.description).toBe('office\n\tsecond line');
      for (const ch of [
        '\u0000',
        '\r',
        '\u001B',
        '\u0085',
        '\u202E',
        '\u2066',
        '\u200B',
        '\uFEFF',
      ]) {
        const code = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
        for (const res of [
          await api.call('POST', '/credentials', { description: `my${ch}laptop` }),
          await api.call('PATCH', `/ip_policies/${ok.body.id}`, { description: `my${ch}laptop` }),
        ]) {
          expect(res.status).toBe(400);
          expect(res.body).toMatchObject({
            error_code: 'ERR_NGROK_215',
            details: { field: 'description' },
          });
          expect(res.body.msg).toMatch(
            /^description: must not contain control characters other than newline and tab, nor bidirectional-formatting or zero-width characters: found /,
          );
          expect(res.body.msg).toMatch(
            new RegExp(`found ${code.replace('+', '\\+')} \\([a-z -]+\\) at character 3$`),
          );
        }
      }
      expect((await api.call('GET', `/ip_policies/${ok.body.id}`)).body.description).toBe(
        'office\n\tsecond line',
      );
    });

    it('holds region to the name rules', async () => {
      const res = await api.call('POST', '/reserved_addrs', { region: 'us\u202Eeu' });
      expect(res.status).toBe(400);
      expect(res.body.msg).toMatch(/^region: must not contain control, bidirectional-formatting/);
    });

    it('refuses NUL and unpaired surrogates in any string, on both databases, with a 400 not a 500', async () => {
      const cases: [string, string, unknown, string][] = [
        ['POST', '/ip_policies', { metadata: 'a\u0000b' }, 'metadata'],
        ['POST', '/ip_policies', { metadata: 'a\uD800b' }, 'metadata'],
        ['GET', '/bot_users/bot_%00x', undefined, 'id'],
        ['GET', '/bot_users?before_id=%00', undefined, 'before_id'],
        ['POST', '/credentials', { owner_id: 'bot_\u0000' }, 'owner_id'],
        ['POST', '/credentials', { acl: ['*', 'bind:a\u0000.com'] }, 'acl[1]'],
        ['POST', '/edges/tcp', { backend: { backend_id: 'bkdtg_\u0000' } }, 'backend.backend_id'],
        ['POST', '/backends/tunnel_group', { labels: { 'a\u0000': 'b' } }, 'labels.a\\u{0}'],
      ];
      for (const [method, path, body, field] of cases) {
        const res = await api.call(method, path, body);
        expect(res.status, `${method} ${path}`).toBe(400);
        expect(res.body.error_code).toBe('ERR_NGROK_215');
        expect(res.body.details.field).toBe(field);
        expect(res.body.msg).toContain('must not contain U+0000 (NUL) or unpaired surrogates');
      }
    });
  });

  describe('paging', () => {
    it('pages newest first across 250 items with absolute next_page_uri, null at the end', async () => {
      const created: string[] = [];
      for (let i = 0; i < 250; i++)
        created.push((await api.call('POST', '/bot_users', { name: `pager-${i}` })).body.id);
      const seen: string[] = [];
      let url: string | null = '/bot_users?limit=100';
      let pages = 0;
      while (url) {
        const res = await api.call('GET', url.replace(TEST_BASE_URL, ''));
        expect(res.status).toBe(200);
        expect(res.body.uri).toBe(`${TEST_BASE_URL}/bot_users`);
        seen.push(...res.body.bot_users.map((b: { id: string }) => b.id));
        url = res.body.next_page_uri;
        if (url) expect(url.startsWith(`${TEST_BASE_URL}/bot_users?before_id=`)).toBe(true);
        pages++;
      }
      const ours = seen.filter((id) => created.includes(id));
      expect(ours).toEqual([...created].reverse());
      expect(new Set(seen).size).toBe(seen.length);
      expect(pages).toBe(Math.ceil(seen.length / 100));
    });

    it('sets next_page_uri to null when a full page is the last one', async () => {
      const all = await api.call('GET', '/bot_users');
      const total = all.body.bot_users.length as number;
      const exact = await api.call('GET', `/api_keys?limit=100`);
      expect(exact.body.next_page_uri).toBeNull();
      expect(total).toBeGreaterThan(0);
      const keys = exact.body.keys.length as number;
      const page = await api.call('GET', `/api_keys?limit=${keys}`);
      expect(page.body.keys).toHaveLength(keys);
      expect(page.body.next_page_uri).toBeNull();
    });

    it('refuses a bad limit (ERR_NGROK_233) and an unknown query parameter (ERR_NGROK_231)', async () => {
      for (const limit of ['0', '101', 'ten', '-1']) {
        const res = await api.call('GET', `/bot_users?limit=${limit}`);
        expect(res.status).toBe(400);
        expect(res.body.error_code).toBe('ERR_NGROK_233');
      }
      const res = await api.call('GET', '/bot_users?colour=blue');
      expect(res.status).toBe(400);
      expect(res.body.error_code).toBe('ERR_NGROK_231');
    });
  });
});

describe('API rate limiting', () => {
  it('answers 429 ERR_NGROK_226 with Retry-After once a key exceeds its limit', async () => {
    const api = await createTestApi('sqlite', { rateLimit: { max: 5, windowSeconds: 60 } });
    try {
      for (let i = 0; i < 5; i++) expect((await api.call('GET', '/bot_users')).status).toBe(200);
      const res = await api.call('GET', '/bot_users');
      expect(res.status).toBe(429);
      expect(res.body.error_code).toBe('ERR_NGROK_226');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await api.close();
    }
  });

  it('keeps the error shape and headers, counts per key and leaves public paths alone', async () => {
    const api = await createTestApi('sqlite', { rateLimit: { max: 2, windowSeconds: 60 } });
    try {
      expect((await api.call('GET', '/bot_users')).headers['x-ratelimit-limit']).toBeUndefined();
      // Unknown paths count too: the limit is on the key, not on the routes.
      expect((await api.call('GET', '/no_such_resource')).status).toBe(404);
      const res = await api.call('GET', '/bot_users');
      expect(res.status).toBe(429);
      expect(res.body).toEqual({
        error_code: 'ERR_NGROK_226',
        status_code: 429,
        msg: expect.stringMatching(
          /^Too many requests: the API rate limit is exceeded\. Retry after \d+ seconds\.$/,
        ),
        details: { operation_id: res.headers['operation-id'] },
      });
      const retryAfter = Number(res.headers['retry-after']);
      expect(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 60).toBe(true);
      expect(res.body.msg).toContain(`${retryAfter} seconds`);
      expect(Object.keys(res.headers).filter((h) => h.includes('ratelimit'))).toEqual([]);
      // Another key has its own budget; the public paths are not limited at all.
      const other = (await api.repos.apiKeys.create({ description: 'other' })).token!;
      const auth = { authorization: `Bearer ${other}` };
      expect((await api.call('GET', '/bot_users', undefined, auth)).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        expect((await api.call('GET', '/openapi.json')).status).toBe(200);
      }
    } finally {
      await api.close();
    }
  });
});
