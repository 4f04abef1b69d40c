import { describe, expect, it } from 'vitest';
import { withTestStore } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

/** ssh-keygen -t ed25519: its public line and the fingerprint ssh-keygen -lf prints. */
const ED25519 =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEGxxc5XFvKLcCOLuNt1b7lK2TUHCBb8TswAQRcPLPLj me@laptop';
const ED25519_FINGERPRINT = 'SHA256:s0R8V/CFN4daTWlNP8QrzMpvv87IItlBxpnBCd4KgpM';

describe.each(DATABASE_KINDS)('SshCredentialRepository (%s)', (kind) => {
  const t = withTestStore(kind);

  it('stores the key without its comment, finds it by fingerprint, and refuses it twice', async () => {
    const created = await t.repos.sshCredentials.create({
      public_key: ED25519,
      acl: ['bind:*.SiteA.example.com'],
    });
    expect(created).toMatchObject({
      public_key: ED25519.replace(' me@laptop', ''),
      fingerprint: ED25519_FINGERPRINT,
      acl: ['bind:*.sitea.example.com'],
    });
    expect(await t.repos.sshCredentials.authenticate(ED25519_FINGERPRINT)).toEqual({
      credential: { id: created.id, acl: ['bind:*.sitea.example.com'], owner_id: created.owner_id },
      ownerActive: true,
    });
    await expect(t.repos.sshCredentials.create({ public_key: ED25519 })).rejects.toMatchObject({
      code: 'ERR_BURROW_SSH_KEY_TAKEN',
      statusCode: 409,
    });
    await expect(
      t.repos.sshCredentials.create({ public_key: 'ssh-rsa AAAA' }),
    ).rejects.toMatchObject({ code: 'ERR_BURROW_SSH_KEY_INVALID', field: 'public_key' });
    await t.repos.sshCredentials.delete(created.id);
  });

  it("gives the standing of a bot user's key: inactive once the bot is, gone once deleted", async () => {
    const bot = await t.repos.botUsers.create({ name: 'ssh bot' });
    const key = await t.repos.sshCredentials.create({ public_key: ED25519, owner_id: bot.id });
    expect((await t.repos.sshCredentials.standing([key.id])).get(key.id)).toBe('ok');
    await t.repos.botUsers.update(bot.id, { active: false });
    expect((await t.repos.sshCredentials.standing([key.id])).get(key.id)).toBe('inactive');
    expect((await t.repos.sshCredentials.authenticate(ED25519_FINGERPRINT))?.ownerActive).toBe(
      false,
    );
    await t.repos.sshCredentials.delete(key.id);
    expect((await t.repos.sshCredentials.standing([key.id])).has(key.id)).toBe(false);
  });
});
