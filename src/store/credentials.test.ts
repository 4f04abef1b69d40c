import { describe, expect, it } from 'vitest';
import { withTestStore } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { normalizeAcl } from './credentials.js';

describe('normalizeAcl', () => {
  it('lowercases names and addresses and keeps labels and the allow-all form as written', () => {
    expect(
      normalizeAcl([
        '*',
        'bind:*',
        'bind:A.Example.com',
        'bind:*.B.example.com',
        'bind:H.io:1',
        'bind:K=V',
      ]),
    ).toEqual([
      '*',
      'bind:*',
      'bind:a.example.com',
      'bind:*.b.example.com',
      'bind:h.io:1',
      'bind:K=V',
    ]);
  });

  it('throws ERR_NGROK_600 naming the index of the bad rule', () => {
    expect(() => normalizeAcl(['bind:ok.example.com', 'bind:'])).toThrow(
      expect.objectContaining({ code: 'ERR_NGROK_600', field: 'acl[1]', statusCode: 400 }),
    );
  });
});

describe.each(DATABASE_KINDS)('CredentialRepository.authenticate (%s)', (kind) => {
  const t = withTestStore(kind);

  it('returns the credential, its ACL and owner for the right token', async () => {
    const cred = await t.repos.credentials.create({ acl: ['bind:*.SiteA.example.com'] });
    const auth = await t.repos.credentials.authenticate(cred.token!);
    expect(auth).toEqual({
      credential: {
        id: cred.id,
        acl: ['bind:*.sitea.example.com'],
        owner_id: await t.repos.settings.accountUserId(),
      },
      ownerActive: true,
    });
  });

  it('refuses a wrong secret for an existing credential id', async () => {
    const cred = await t.repos.credentials.create({});
    const [idBody, secret] = cred.token!.split('_') as [string, string];
    const flipped = secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A');
    expect(await t.repos.credentials.authenticate(`${idBody}_${flipped}`)).toBeUndefined();
    // Another credential's secret does not open this one.
    const other = await t.repos.credentials.create({});
    const otherSecret = other.token!.split('_')[1]!;
    expect(await t.repos.credentials.authenticate(`${idBody}_${otherSecret}`)).toBeUndefined();
  });

  it.each([
    '',
    'garbage',
    'not a token at all_x',
    '2f0000000000000000000000000_abcdefabcdefabcdefab',
    'cr_2f0000000000000000000000000',
    '../../etc/passwd_aaaaaaaaaaaaaaaaaaaa',
  ])('refuses a garbled or unknown token %j', async (token) => {
    expect(await t.repos.credentials.authenticate(token)).toBeUndefined();
  });

  it('refuses an API key presented as an authtoken', async () => {
    const key = await t.repos.apiKeys.create({});
    expect(await t.repos.credentials.authenticate(key.token!)).toBeUndefined();
  });

  it('refuses the token of a deleted credential', async () => {
    const cred = await t.repos.credentials.create({});
    expect(await t.repos.credentials.delete(cred.id)).toBe(true);
    expect(await t.repos.credentials.authenticate(cred.token!)).toBeUndefined();
  });

  it('reports ownerActive false while the owning bot user is inactive', async () => {
    const bot = await t.repos.botUsers.create({ name: 'edge-test-bot' });
    const cred = await t.repos.credentials.create({ owner_id: bot.id, acl: ['bind:app=web'] });
    expect(await t.repos.credentials.authenticate(cred.token!)).toEqual({
      credential: { id: cred.id, acl: ['bind:app=web'], owner_id: bot.id },
      ownerActive: true,
    });
    await t.repos.botUsers.update(bot.id, { active: false });
    expect((await t.repos.credentials.authenticate(cred.token!))?.ownerActive).toBe(false);
    await t.repos.botUsers.update(bot.id, { active: true });
    expect((await t.repos.credentials.authenticate(cred.token!))?.ownerActive).toBe(true);
  });

  it('sees an ACL change at the next authentication', async () => {
    const cred = await t.repos.credentials.create({ acl: ['bind:a.example.com'] });
    await t.repos.credentials.update(cred.id, { acl: ['bind:b.example.com'] });
    expect((await t.repos.credentials.authenticate(cred.token!))?.credential.acl).toEqual([
      'bind:b.example.com',
    ]);
  });

  it('stores only a hash of the token', async () => {
    const cred = await t.repos.credentials.create({});
    const row = await t.store.db
      .selectFrom('credentials')
      .selectAll()
      .where('id', '=', cred.id)
      .executeTakeFirstOrThrow();
    expect(Object.values(row).join(' ')).not.toContain(cred.token!.split('_')[1]!);
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });
});
