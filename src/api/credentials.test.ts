import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

describe.each(DATABASE_KINDS)('credentials API (%s)', (kind) => {
  let api: TestApi;
  let accountUser: string;
  beforeAll(async () => {
    api = await createTestApi(kind);
    accountUser = await api.repos.settings.accountUserId();
  });
  afterAll(async () => api.close());

  it('creates a credential: 201, token shown once, owner the account user by default', async () => {
    const res = await api.call('POST', '/credentials', {
      description: 'development cred for alan@example.com',
      acl: ['bind:1.tcp.ngrok.io:20002', 'bind:132.devices.company.com'],
    });
    expect(res.status).toBe(201);
    const body27 = res.body.id.slice(3);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^cr_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/credentials/${res.body.id}`,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      description: 'development cred for alan@example.com',
      metadata: '',
      token: expect.stringMatching(new RegExp(`^${body27}_[0-9A-Za-z]{32}$`)),
      acl: ['bind:1.tcp.ngrok.io:20002', 'bind:132.devices.company.com'],
      owner_id: accountUser,
    });
  });

  it('never shows the token again: null on get and list', async () => {
    const { body: cred } = await api.call('POST', '/credentials', {});
    expect(cred.token).toEqual(expect.any(String));
    expect(cred.acl).toEqual([]);
    const got = await api.call('GET', `/credentials/${cred.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ ...cred, token: null });
    const list = await api.call('GET', '/credentials');
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/credentials`);
    const listed = list.body.credentials.find((c: { id: string }) => c.id === cred.id);
    expect(listed).toEqual({ ...cred, token: null });
    for (const c of list.body.credentials) expect(c.token).toBeNull();
    const patched = await api.call('PATCH', `/credentials/${cred.id}`, { description: 'x' });
    expect(patched.body.token).toBeNull();
  });

  it('creates a credential without any body', async () => {
    const res = await api.call('POST', '/credentials');
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ acl: [], owner_id: accountUser, description: '' });
  });

  it('lets a bot user own a credential', async () => {
    const { body: bot } = await api.call('POST', '/bot_users', { name: 'sitea-agents' });
    const res = await api.call('POST', '/credentials', {
      owner_id: bot.id,
      acl: ['bind:*.sitea.example.com'],
    });
    expect(res.status).toBe(201);
    expect(res.body.owner_id).toBe(bot.id);
    // The bot cannot be deleted while it owns the token.
    expect((await api.call('DELETE', `/bot_users/${bot.id}`)).status).toBe(409);
    expect((await api.call('DELETE', `/credentials/${res.body.id}`)).status).toBe(204);
    expect((await api.call('DELETE', `/bot_users/${bot.id}`)).status).toBe(204);
  });

  it.each(['bot_2f00000000000000000000000000', 'usr_someoneelse00000000000000', 'nonsense'])(
    'refuses an unknown owner %s with 400 ERR_NGROK_630',
    async (owner) => {
      const res = await api.call('POST', '/credentials', { owner_id: owner });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error_code: 'ERR_NGROK_630',
        details: { field: 'owner_id' },
      });
      expect(res.body.msg).toContain(owner);
    },
  );

  it('normalises rules: lowercase names and addresses, labels kept as written', async () => {
    const res = await api.call('POST', '/credentials', {
      acl: [
        '*',
        'bind:*',
        'bind:Dev.Example.COM',
        'bind:*.SiteA.Example.com',
        'bind:TCP.x.io:20001',
        'bind:App=Web',
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body.acl).toEqual([
      '*',
      'bind:*',
      'bind:dev.example.com',
      'bind:*.sitea.example.com',
      'bind:tcp.x.io:20001',
      'bind:App=Web',
    ]);
  });

  it.each([
    ['no bind: prefix', ['foo.example.com'], 0, "must be '*' or start with 'bind:'"],
    ['bad domain', ['bind:a.example.com', 'bind:bad_name.example.com'], 1, 'must name a domain'],
    ['wildcard not first', ['bind:a.*.example.com'], 0, 'must name a domain'],
    ['wildcard address host', ['bind:*:20001'], 0, 'must name a host'],
    ['port out of range', ['bind:tcp.x.io:70000'], 0, 'must name a domain'],
    ['label without value', ['bind:ok=1', 'bind:ok=2', 'bind:app='], 2, '<key>=<value>'],
    ['label with two =', ['bind:a=b=c'], 0, '<key>=<value>'],
    ['label bad characters', ['bind:app=hello world'], 0, 'may contain only'],
    ['empty rule', [''], 0, "must be '*' or start with 'bind:'"],
  ])('refuses a bad ACL rule (%s) with ERR_NGROK_600 naming acl[i]', async (_, acl, index, why) => {
    const res = await api.call('POST', '/credentials', { acl });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error_code: 'ERR_NGROK_600',
      details: { field: `acl[${index}]` },
    });
    expect(res.body.msg).toContain(`acl[${index}]`);
    expect(res.body.msg).toContain(why);
  });

  it('refuses an ACL that is not a list of strings', async () => {
    const notList = await api.call('POST', '/credentials', { acl: 'bind:*' });
    expect(notList.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'acl: must be an array',
    });
    const notString = await api.call('POST', '/credentials', { acl: ['bind:*', 3] });
    expect(notString.body).toMatchObject({
      error_code: 'ERR_NGROK_215',
      msg: 'acl[1]: must be a string',
    });
  });

  it('updates description, metadata and acl; acl replaces the whole list', async () => {
    const { body: cred } = await api.call('POST', '/credentials', {
      description: 'before',
      acl: ['bind:a.example.com', 'bind:b.example.com'],
    });
    const res = await api.call('PATCH', `/credentials/${cred.id}`, {
      metadata: '{"site":"a"}',
      acl: ['bind:C.example.com'],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      ...cred,
      token: null,
      metadata: '{"site":"a"}',
      acl: ['bind:c.example.com'],
    });
    const cleared = await api.call('PATCH', `/credentials/${cred.id}`, { acl: [] });
    expect(cleared.body.acl).toEqual([]);
    expect(cleared.body.description).toBe('before');
  });

  it('treats an empty PATCH as a no-op', async () => {
    const { body: cred } = await api.call('POST', '/credentials', { acl: ['bind:x=y'] });
    const res = await api.call('PATCH', `/credentials/${cred.id}`, {});
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...cred, token: null });
  });

  it('refuses a bad ACL in a PATCH and leaves the credential unchanged', async () => {
    const { body: cred } = await api.call('POST', '/credentials', { acl: ['bind:a.example.com'] });
    const res = await api.call('PATCH', `/credentials/${cred.id}`, {
      description: 'changed',
      acl: ['bind:ok.example.com', 'nope'],
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_600', details: { field: 'acl[1]' } });
    const got = await api.call('GET', `/credentials/${cred.id}`);
    expect(got.body).toEqual({ ...cred, token: null });
  });

  it('refuses fields it does not have: owner_id and token in a PATCH, unknown fields', async () => {
    const { body: cred } = await api.call('POST', '/credentials', {});
    const owner = await api.call('PATCH', `/credentials/${cred.id}`, { owner_id: accountUser });
    expect(owner.body).toMatchObject({
      error_code: 'ERR_NGROK_214',
      details: { field: 'owner_id' },
    });
    const token = await api.call('POST', '/credentials', { token: 'mine' });
    expect(token.body).toMatchObject({ error_code: 'ERR_NGROK_214', details: { field: 'token' } });
  });

  it('enforces the description and metadata byte limits', async () => {
    const desc = await api.call('POST', '/credentials', { description: 'é'.repeat(128) });
    expect(desc.body).toMatchObject({
      error_code: 'ERR_NGROK_7073',
      details: { field: 'description' },
    });
    const meta = await api.call('POST', '/credentials', { metadata: 'x'.repeat(4097) });
    expect(meta.body).toMatchObject({
      error_code: 'ERR_NGROK_100',
      details: { field: 'metadata' },
    });
  });

  it('deletes: 204, then 404 on get, patch and delete', async () => {
    const { body: cred } = await api.call('POST', '/credentials', {});
    await expectDeletedForGood(api, `/credentials/${cred.id}`);
  });

  it('pages newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await api.call('POST', '/credentials', {})).body.id);
    const first = await api.call('GET', '/credentials?limit=2');
    expect(first.body.credentials.map((c: { id: string }) => c.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/credentials?before_id=${ids[1]}&limit=2`,
    );
    const second = await api.call('GET', `/credentials?before_id=${ids[1]}&limit=1`);
    expect(second.body.credentials.map((c: { id: string }) => c.id)).toEqual([ids[0]]);
  });
});
