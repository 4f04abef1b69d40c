import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';

/** The attack of issue 27: a custom-response that prints a secret to anyone. */
const LEAK = `
on_http_request:
  - name: leak
    actions:
      - type: custom-response
        config: { body: "\${secrets.get('prod', 'oidc')}" }
`;

describe('POST /traffic_policy/validate and secrets', () => {
  let api: TestApi;
  let withoutGrant: string;
  let withGrant: string;

  beforeAll(async () => {
    api = await createTestApi('sqlite');
    const credential = async (acl: string[]) => {
      const made = await api.call('POST', '/credentials', { acl });
      expect(made.status).toBe(201);
      return made.body.id as string;
    };
    withoutGrant = await credential(['bind:leak.example']);
    withGrant = await credential(['bind:leak.example', 'secrets:read:prod']);
  });
  afterAll(async () => {
    await api.close();
  });

  const validate = (body: Record<string, unknown>) =>
    api.call('POST', '/traffic_policy/validate', { protocol: 'https', value: LEAK, ...body });

  it('refuses, for an authtoken without the grant, naming the vault, the rule and the fix', async () => {
    const reply = await validate({ credential_id: withoutGrant });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({
      valid: false,
      error: { error_code: 'ERR_BURROW_SECRET_NOT_GRANTED', details: { field: 'value' } },
      location: { phase: 'on_http_request', rule: 0, rule_name: 'leak', action: 0 },
    });
    const msg = (reply.body.error as { msg: string }).msg;
    expect(msg).toContain('secrets.get("prod", "oidc")');
    expect(msg).toContain(`credential ${withoutGrant}`);
    expect(msg).toContain("'secrets:read:prod'");
  });

  it('accepts it for an authtoken with the grant, and for the API (whose keys are admins)', async () => {
    expect((await validate({ credential_id: withGrant })).body).toEqual({ valid: true });
    expect((await validate({})).body).toEqual({ valid: true });
  });

  it('refuses computing on a secret whoever asks', async () => {
    const reply = await validate({
      value: `on_http_request:\n  - actions:\n      - type: log\n        config: { metadata: { n: "\${size(secrets.get('prod', 'oidc'))}" } }\n`,
    });
    expect(reply.body).toMatchObject({ valid: false, error: { error_code: 'ERR_NGROK_2200' } });
    expect((reply.body.error as { msg: string }).msg).toMatch(
      /secrets.get\("prod", "oidc"\) at column \d+ may only be used whole/,
    );
  });

  it('refuses computing on a secret when a cloud endpoint or an edge is saved, and accepts placing it', async () => {
    const logSize = JSON.stringify({
      on_tcp_connect: [
        {
          name: 'oracle',
          actions: [
            { type: 'log', config: { metadata: { n: "${size(secrets.get('prod', 'oidc'))}" } } },
          ],
        },
      ],
    });
    expect((await api.call('POST', '/reserved_domains', { domain: 'leak.example' })).status).toBe(
      201,
    );
    const endpoint = await api.call('POST', '/endpoints', {
      type: 'cloud',
      url: 'https://leak.example',
      traffic_policy: logSize,
    });
    expect(endpoint.status).toBe(400);
    expect(endpoint.body).toMatchObject({ error_code: 'ERR_NGROK_2200' });
    expect(endpoint.body.msg).toMatch(
      /rule 0 \("oracle"\).*secrets.get\("prod", "oidc"\).*may only be used whole/,
    );
    const placed = await api.call('POST', '/endpoints', {
      type: 'cloud',
      url: 'https://leak.example',
      traffic_policy: LEAK,
    });
    expect(placed.status).toBe(201);
    const edge = await api.call('POST', '/edges/tls', {});
    expect(edge.status).toBe(201);
    const module = await api.call('PUT', `/edges/tls/${edge.body.id as string}/traffic_policy`, {
      value: logSize,
    });
    expect(module.status).toBe(400);
    expect(module.body).toMatchObject({ error_code: 'ERR_NGROK_2200' });
    expect(module.body.msg).toMatch(/secrets.get\("prod", "oidc"\).*may only be used whole/);
  });

  it('refuses an IP policy id that does not exist, as a bind does, and accepts one that does', async () => {
    const policy = (id: string) =>
      `on_http_request: [{actions: [{type: restrict-ips, config: {ip_policies: [${id}]}}]}]`;
    const unknown = 'ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52';
    const refused = await validate({ value: policy(unknown) });
    expect(refused.body).toMatchObject({ valid: false, error: { error_code: 'ERR_NGROK_2204' } });
    expect((refused.body.error as { msg: string }).msg).toContain(
      `IP policies that do not exist: ${unknown}`,
    );
    const made = await api.call('POST', '/ip_policies', { description: 'office' });
    expect(made.status).toBe(201);
    expect((await validate({ value: policy(made.body.id as string) })).body).toEqual({
      valid: true,
    });
  });

  it('refuses an unknown IP policy id wherever a policy is saved, naming the field', async () => {
    const unknown = 'ipp_2bhsNc9X6FO3i2wzTOgIH8jAe53';
    const policy = JSON.stringify({
      on_tcp_connect: [{ actions: [{ type: 'restrict-ips', config: { ip_policies: [unknown] } }] }],
    });
    const refusedAs = (reply: { status: number; body: Record<string, unknown> }, field: string) => {
      expect(reply.status).toBe(400);
      expect(reply.body).toMatchObject({ error_code: 'ERR_NGROK_2204', details: { field } });
      expect(reply.body.msg).toBe(
        `${field}: restrict-ips names IP policies that do not exist: ${unknown}. Create them with POST /ip_policies, or remove them from ip_policies.`,
      );
    };
    expect((await api.call('POST', '/reserved_domains', { domain: 'ipp.example' })).status).toBe(
      201,
    );
    const cloud = { type: 'cloud', url: 'https://ipp.example' };
    refusedAs(
      await api.call('POST', '/endpoints', { ...cloud, traffic_policy: policy }),
      'traffic_policy',
    );
    const endpoint = await api.call('POST', '/endpoints', cloud);
    expect(endpoint.status).toBe(201);
    const endpointPath = `/endpoints/${endpoint.body.id as string}`;
    refusedAs(await api.call('PATCH', endpointPath, { traffic_policy: policy }), 'traffic_policy');

    for (const type of ['tcp', 'tls']) {
      const body = { traffic_policy: { value: policy } };
      refusedAs(await api.call('POST', `/edges/${type}`, body), 'traffic_policy.value');
      const edge = await api.call('POST', `/edges/${type}`, {});
      expect(edge.status).toBe(201);
      const path = `/edges/${type}/${edge.body.id as string}`;
      refusedAs(await api.call('PATCH', path, body), 'traffic_policy.value');
      refusedAs(await api.call('PUT', `${path}/traffic_policy`, { value: policy }), 'value');
      expect((await api.call('GET', `${path}/traffic_policy`)).status).toBe(404);
    }

    // A policy naming an IP policy that exists is taken by the same saves.
    const made = await api.call('POST', '/ip_policies', { description: 'saves' });
    const known = policy.replace(unknown, made.body.id as string);
    expect((await api.call('PATCH', endpointPath, { traffic_policy: known })).status).toBe(200);
    const edge = await api.call('POST', '/edges/tcp', { traffic_policy: { value: known } });
    expect(edge.status).toBe(201);
  });

  it('answers 404 for a credential that does not exist', async () => {
    expect((await validate({ credential_id: 'cr_2bhsNc9X6FO3i2wzTOgIH8jAe52' })).status).toBe(404);
  });

  it('keeps secrets rules in the ACL as written, and refuses one without a vault', async () => {
    const shown = await api.call('GET', `/credentials/${withGrant}`);
    expect(shown.body.acl).toEqual(['bind:leak.example', 'secrets:read:prod']);
    const bad = await api.call('POST', '/credentials', { acl: ['secrets:read:'] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error_code: 'ERR_NGROK_600', details: { field: 'acl[0]' } });
  });
});
