import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { expectDeletedForGood } from '../../test/support/api-delete.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { SECRET_VALUE_MAX_BYTES } from '../store/vaults.js';
import type { ConfigTopic } from './context.js';

const VALUE = 'hunter2-the-client-secret';

/**
 * What a create answers for a `prefix_…` resource of `collection`: its id and uri, `fields`, and
 * created_at (RFC 3339) equal to updated_at.
 */
function created(
  collection: string,
  prefix: string,
  body: { id: string; created_at: string },
  fields: Record<string, unknown>,
) {
  return {
    id: expect.stringMatching(new RegExp(`^${prefix}_[0-9A-Za-z]{27}$`)),
    uri: `${TEST_BASE_URL}/${collection}/${body.id}`,
    ...fields,
    created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    updated_at: body.created_at,
  };
}

describe.each(DATABASE_KINDS)('vaults and secrets API (%s)', (kind) => {
  let api: TestApi;
  const topics: ConfigTopic[] = [];
  beforeAll(async () => {
    api = await createTestApi(kind, {
      online: { tunnelsMatching: () => [], configChanged: (t) => topics.push(t) },
    });
  });
  afterAll(async () => api.close());

  let n = 0;
  async function vault(): Promise<{ id: string; name: string }> {
    const res = await api.call('POST', '/vaults', { name: `vault-${++n}` });
    expect(res.status).toBe(201);
    return res.body as { id: string; name: string };
  }

  it('creates, gets, updates, lists and deletes a vault', async () => {
    const res = await api.call('POST', '/vaults', {
      name: 'oauth',
      description: 'identity provider',
      metadata: '{"team":"web"}',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual(
      created('vaults', 'vault', res.body, {
        name: 'oauth',
        description: 'identity provider',
        metadata: '{"team":"web"}',
      }),
    );
    expect((await api.call('GET', `/vaults/${res.body.id}`)).body).toEqual(res.body);
    const patched = await api.call('PATCH', `/vaults/${res.body.id}`, { name: 'oauth2' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'oauth2', description: 'identity provider' });
    const list = await api.call('GET', '/vaults');
    expect(list.body.uri).toBe(`${TEST_BASE_URL}/vaults`);
    expect(list.body.vaults).toContainEqual(patched.body);
    await expectDeletedForGood(api, `/vaults/${res.body.id}`);
    expect(topics).toContain('secrets');
  });

  it('refuses a duplicate or empty vault name', async () => {
    const { name } = await vault();
    const dup = await api.call('POST', '/vaults', { name });
    expect(dup.status).toBe(409);
    expect(dup.body.error_code).toBe('ERR_BURROW_NAME_TAKEN');
    expect(dup.body.msg).toContain(name);
    const empty = await api.call('POST', '/vaults', { name: '' });
    expect(empty.status).toBe(400);
    expect(empty.body.details.field).toBe('name');
    expect((await api.call('POST', '/vaults', {})).status).toBe(400);
  });

  it('never returns a secret value: create, get, list, PATCH and the audit trail', async () => {
    const v = await vault();
    const made = await api.call('POST', '/secrets', {
      vault_id: v.id,
      name: 'client_secret',
      value: VALUE,
      description: 'IdP client secret',
    });
    expect(made.status).toBe(201);
    expect(made.body).toEqual(
      created('secrets', 'sec', made.body, {
        name: 'client_secret',
        description: 'IdP client secret',
        metadata: '',
        vault: { id: v.id, uri: `${TEST_BASE_URL}/vaults/${v.id}` },
      }),
    );
    const id = made.body.id as string;
    const replies = [
      made,
      await api.call('GET', `/secrets/${id}`),
      await api.call('GET', '/secrets'),
      await api.call('GET', `/vaults/${v.id}/secrets`),
      await api.call('PATCH', `/secrets/${id}`, { value: 'rotated-value-42' }),
      await api.call('GET', '/audit_events'),
    ];
    for (const reply of replies) {
      expect(reply.status).toBe(200 + (reply === made ? 1 : 0));
      expect(JSON.stringify(reply.body)).not.toContain(VALUE);
      expect(JSON.stringify(reply.body)).not.toContain('rotated-value-42');
      expect(JSON.stringify(reply.body)).not.toContain('"value"');
    }
    const ofVault = replies[3]!.body;
    expect(ofVault.uri).toBe(`${TEST_BASE_URL}/vaults/${v.id}/secrets`);
    expect(ofVault.secrets.map((s: { id: string }) => s.id)).toEqual([id]);
    expect(replies[4]!.body).toMatchObject({ id, name: 'client_secret' });
    expect(await api.repos.secrets.entries()).toContainEqual({
      vault: v.name,
      name: 'client_secret',
      value: 'rotated-value-42',
    });
  });

  it('stores values encrypted, bound to their row', async () => {
    const v = await vault();
    const { body } = await api.call('POST', '/secrets', {
      vault_id: v.id,
      name: 'token',
      value: VALUE,
    });
    const row = await api.store.db
      .selectFrom('secrets')
      .selectAll()
      .where('id', '=', body.id)
      .executeTakeFirstOrThrow();
    expect(row.value_encrypted).toMatch(/^v1:[A-Za-z0-9+/=]+$/);
    expect(JSON.stringify(row)).not.toContain(VALUE);
    expect(Buffer.from(row.value_encrypted.slice(3), 'base64').toString('latin1')).not.toContain(
      VALUE,
    );
    const key = await api.repos.settings.get('secrets_key');
    expect(Buffer.from(key!, 'base64')).toHaveLength(32);
    // A ciphertext copied onto another row does not decrypt there.
    const other = await api.call('POST', '/secrets', { vault_id: v.id, name: 'o', value: 'x' });
    await api.store.db
      .updateTable('secrets')
      .set({ value_encrypted: row.value_encrypted })
      .where('id', '=', other.body.id)
      .execute();
    await expect(api.repos.secrets.entries()).rejects.toThrow();
    await api.call('DELETE', `/secrets/${other.body.id}`);
    expect(await api.repos.secrets.entries()).toContainEqual({
      vault: v.name,
      name: 'token',
      value: VALUE,
    });
  });

  it('limits values to 64 KiB, refuses unknown vaults, duplicate names and moves', async () => {
    const v = await vault();
    const big = await api.call('POST', '/secrets', {
      vault_id: v.id,
      name: 'big',
      value: 'x'.repeat(SECRET_VALUE_MAX_BYTES + 1),
    });
    expect(big.status).toBe(400);
    expect(big.body.msg).toBe(`value: must be at most ${SECRET_VALUE_MAX_BYTES} bytes of UTF-8`);
    expect(JSON.stringify(big.body)).not.toContain('xxxxxxxx');
    const fits = await api.call('POST', '/secrets', {
      vault_id: v.id,
      name: 'big',
      value: 'x'.repeat(SECRET_VALUE_MAX_BYTES),
    });
    expect(fits.status).toBe(201);
    const unknown = await api.call('POST', '/secrets', {
      vault_id: 'vault_2f8XhbJ2X1W4M8oVqQ1UuRgVjbw',
      name: 'a',
      value: 'b',
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({
      error_code: 'ERR_NGROK_223',
      details: { field: 'vault_id' },
    });
    const dup = await api.call('POST', '/secrets', { vault_id: v.id, name: 'big', value: 'y' });
    expect(dup.status).toBe(409);
    expect(dup.body.error_code).toBe('ERR_BURROW_NAME_TAKEN');
    const other = await vault();
    const move = await api.call('PATCH', `/secrets/${fits.body.id}`, { vault_id: other.id });
    expect(move.status).toBe(400);
    expect(move.body.details.field).toBe('vault_id');
    expect((await api.call('POST', '/secrets', { vault_id: v.id, name: 'n' })).status).toBe(400);
  });

  it("deletes a vault's secrets with it, and 404s for missing ones", async () => {
    const v = await vault();
    const { body: s } = await api.call('POST', '/secrets', {
      vault_id: v.id,
      name: 'gone',
      value: 'v',
    });
    expect((await api.call('DELETE', `/vaults/${v.id}`)).status).toBe(204);
    expect((await api.call('GET', `/secrets/${s.id}`)).status).toBe(404);
    expect((await api.call('GET', `/vaults/${v.id}/secrets`)).status).toBe(404);
    expect((await api.call('PATCH', `/secrets/${s.id}`, { value: 'z' })).status).toBe(404);
    expect((await api.call('DELETE', `/secrets/${s.id}`)).status).toBe(404);
  });

  it('lists the authtokens whose ACL grants the vault, following its name', async () => {
    const v = await api.call('POST', '/vaults', { name: `readable-${kind}` });
    const name = v.body.name as string;
    const credential = async (acl: string[]) =>
      (await api.call('POST', '/credentials', { acl, description: acl.join(' ') })).body
        .id as string;
    const exact = await credential(['bind:a.example', `secrets:read:${name}`]);
    const all = await credential(['secrets:read:*']);
    await credential(['*']);
    await credential([`secrets:read:${name.toUpperCase()}`]);
    const readers = await api.call('GET', `/vaults/${v.body.id as string}/readers`);
    expect(readers.status).toBe(200);
    const granted = (readers.body.readers as Array<{ id: string; rule: string; uri: string }>)
      .filter((r) => r.id === exact || r.rule === `secrets:read:${name}`)
      .map((r) => [r.id, r.rule, r.uri]);
    expect(granted).toEqual([
      [exact, `secrets:read:${name}`, `${TEST_BASE_URL}/credentials/${exact}`],
    ]);
    expect(readers.body.readers).toContainEqual(
      expect.objectContaining({ id: all, rule: 'secrets:read:*' }),
    );
    // Renamed, the vault is no longer the one `exact` was granted.
    await api.call('PATCH', `/vaults/${v.body.id as string}`, { name: `${name}-renamed` });
    const after = await api.call('GET', `/vaults/${v.body.id as string}/readers`);
    const ids = (after.body.readers as Array<{ id: string }>).map((r) => r.id);
    expect(ids).toContain(all);
    expect(ids).not.toContain(exact);
    expect(
      (await api.call('GET', '/vaults/vault_2bhsNc9X6FO3i2wzTOgIH8jAe52/readers')).status,
    ).toBe(404);
  });
});
