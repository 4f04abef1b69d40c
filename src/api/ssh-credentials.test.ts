import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

/** Public lines made by ssh-keygen (ed25519, ECDSA P-256) and their `ssh-keygen -lf` fingerprints. */
const ED25519 =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEGxxc5XFvKLcCOLuNt1b7lK2TUHCBb8TswAQRcPLPLj alan@laptop';
const ED25519_FINGERPRINT = 'SHA256:s0R8V/CFN4daTWlNP8QrzMpvv87IItlBxpnBCd4KgpM';

describe.each(DATABASE_KINDS)('SSH credentials API (%s)', (kind) => {
  let api: TestApi;
  let accountUser: string;
  beforeAll(async () => {
    api = await createTestApi(kind);
    accountUser = await api.repos.settings.accountUserId();
  });
  afterAll(async () => api.close());

  it('creates, lists, updates the ACL of and deletes an SSH credential', async () => {
    const res = await api.call('POST', '/ssh_credentials', {
      public_key: ED25519,
      description: 'alan',
      acl: ['bind:*.SiteA.example.com'],
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^sshcr_[0-9A-Za-z]{27}$/),
      uri: `${TEST_BASE_URL}/ssh_credentials/${res.body.id}`,
      created_at: expect.any(String),
      description: 'alan',
      metadata: '',
      public_key: ED25519.replace(' alan@laptop', ''),
      fingerprint: ED25519_FINGERPRINT,
      acl: ['bind:*.sitea.example.com'],
      owner_id: accountUser,
    });
    const list = await api.call('GET', '/ssh_credentials');
    expect(list.body.ssh_credentials).toEqual([res.body]);
    const patched = await api.call('PATCH', `/ssh_credentials/${res.body.id}`, {
      acl: ['bind:app.example.com'],
    });
    expect(patched.body.acl).toEqual(['bind:app.example.com']);
    // The key never changes: it is not a field of an update.
    const keyChange = await api.call('PATCH', `/ssh_credentials/${res.body.id}`, {
      public_key: ED25519,
    });
    expect(keyChange).toMatchObject({ status: 400, body: { error_code: 'ERR_NGROK_214' } });
    await expectDeletedForGood(api, `/ssh_credentials/${res.body.id}`);
  });

  it.each([
    ['no key', {}, 'ERR_NGROK_215'],
    ['a DSA key', { public_key: 'ssh-dss AAAAB3NzaC1kc3MAAAA=' }, 'ERR_BURROW_SSH_KEY_INVALID'],
    ['not a key', { public_key: 'hello' }, 'ERR_BURROW_SSH_KEY_INVALID'],
    ['a bad ACL rule', { public_key: ED25519, acl: ['bind:'] }, 'ERR_NGROK_600'],
    ['an unknown owner', { public_key: ED25519, owner_id: 'bot_nobody' }, 'ERR_NGROK_630'],
  ])('refuses %s', async (_, body, code) => {
    const res = await api.call('POST', '/ssh_credentials', body);
    expect(res.status).toBe(400);
    expect(res.body.error_code).toBe(code);
    expect((await api.call('GET', '/ssh_credentials')).body.ssh_credentials).toEqual([]);
  });
});
