import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { CA_EXTENSIONS, certificateMaker } from '../../test/support/certificates.js';

/** How to make one resource of each kind that has `PATCH /<path>/{id}`, and a change to it. */
interface Updatable {
  path: string;
  create: (api: TestApi) => Promise<Record<string, unknown>>;
  patch: Record<string, unknown>;
}

const maker = certificateMaker();

/** POST `body` to `path` and return the created resource (201 or the test fails). */
async function created(api: TestApi, path: string, body: Record<string, unknown>) {
  const res = await api.call('POST', path, body);
  expect(res.status, `POST ${path}: ${JSON.stringify(res.body)}`).toBe(201);
  return res.body as Record<string, unknown>;
}

/** A new ed25519 public key in OpenSSH's one-line form. */
function sshPublicKey(): string {
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' });
  const field = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  const blob = Buffer.concat([field(Buffer.from('ssh-ed25519')), field(raw.subarray(-32))]);
  return `ssh-ed25519 ${blob.toString('base64')}`;
}

let n = 0;
const UPDATABLE: Updatable[] = [
  { path: '/api_keys', create: (a) => created(a, '/api_keys', {}), patch: { description: 'y' } },
  {
    path: '/backends/tunnel_group',
    create: (a) => created(a, '/backends/tunnel_group', { labels: { app: 'x' } }),
    patch: { description: 'y' },
  },
  {
    path: '/backends/failover',
    create: async (a) => {
      const member = await created(a, '/backends/static', { address: '127.0.0.1:81' });
      return created(a, '/backends/failover', { backends: [member.id] });
    },
    patch: { description: 'y' },
  },
  {
    path: '/backends/weighted',
    create: async (a) => {
      const member = await created(a, '/backends/static', { address: '127.0.0.1:82' });
      return created(a, '/backends/weighted', { backends: { [member.id as string]: 1 } });
    },
    patch: { description: 'y' },
  },
  {
    path: '/backends/static',
    create: (a) => created(a, '/backends/static', { address: '127.0.0.1:80' }),
    patch: { description: 'y' },
  },
  {
    path: '/bot_users',
    create: (a) => created(a, '/bot_users', { name: `bot-${++n}` }),
    patch: { name: 'renamed-bot' },
  },
  {
    path: '/certificate_authorities',
    create: (a) =>
      created(a, '/certificate_authorities', {
        ca_pem: maker.make(`/CN=Update CA ${++n}`, CA_EXTENSIONS),
      }),
    patch: { description: 'y' },
  },
  {
    path: '/credentials',
    create: (a) => created(a, '/credentials', {}),
    patch: { description: 'y' },
  },
  { path: '/edges/tcp', create: (a) => created(a, '/edges/tcp', {}), patch: { description: 'y' } },
  { path: '/edges/tls', create: (a) => created(a, '/edges/tls', {}), patch: { description: 'y' } },
  {
    path: '/endpoints',
    create: async (a) => {
      const domain = `update-${++n}.example.com`;
      await created(a, '/reserved_domains', { domain });
      return created(a, '/endpoints', {
        type: 'cloud',
        url: `https://${domain}`,
        traffic_policy: JSON.stringify({ on_http_request: [{ actions: [{ type: 'deny' }] }] }),
      });
    },
    patch: { description: 'y' },
  },
  {
    path: '/event_destinations',
    create: (a) =>
      created(a, '/event_destinations', {
        target: { webhook: { url: 'https://hooks.example.com/burrow' } },
      }),
    patch: { description: 'y' },
  },
  {
    path: '/event_subscriptions',
    create: (a) =>
      created(a, '/event_subscriptions', { sources: [{ type: 'http_request_complete.v0' }] }),
    patch: { description: 'y' },
  },
  {
    path: '/ip_policies',
    create: (a) => created(a, '/ip_policies', {}),
    patch: { description: 'y' },
  },
  {
    path: '/ip_policy_rules',
    create: async (a) => {
      const policy = await created(a, '/ip_policies', {});
      return created(a, '/ip_policy_rules', {
        ip_policy_id: policy.id,
        cidr: `10.${++n}.0.0/16`,
        action: 'allow',
      });
    },
    patch: { description: 'y' },
  },
  {
    path: '/reserved_addrs',
    create: (a) => created(a, '/reserved_addrs', {}),
    patch: { description: 'y' },
  },
  {
    path: '/reserved_domains',
    create: (a) => created(a, '/reserved_domains', { domain: `patch-${++n}.example.com` }),
    patch: { description: 'y' },
  },
  {
    path: '/tls_certificates',
    create: (a) => {
      const domain = `cert-${++n}.example.com`;
      const certificate = maker.make(`/CN=${domain}`, [`subjectAltName=DNS:${domain}`]);
      return created(a, '/tls_certificates', {
        certificate_pem: certificate,
        private_key_pem: maker.lastKey(),
      });
    },
    patch: { description: 'y' },
  },
  {
    path: '/vaults',
    create: (a) => created(a, '/vaults', { name: `vault-${++n}` }),
    patch: { description: 'y' },
  },
  {
    path: '/ssh_credentials',
    create: (a) => created(a, '/ssh_credentials', { public_key: sshPublicKey() }),
    patch: { description: 'y' },
  },
  {
    path: '/users',
    create: (a) =>
      created(a, '/users', { name: `user-${++n}`, password: 'a long enough password' }),
    patch: { role: 'operator' },
  },
  {
    path: '/secrets',
    create: async (a) => {
      const vault = await created(a, '/vaults', { name: `vault-${++n}` });
      return created(a, '/secrets', { vault_id: vault.id, name: 'key', value: 'v' });
    },
    patch: { description: 'y' },
  },
];

describe('updates with the id in the body, as the API reference lists it', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await createTestApi('sqlite');
  });
  afterAll(async () => {
    await api.close();
    maker.cleanup();
  });

  it('covers every resource that has an update', async () => {
    const doc = await api.call('GET', '/openapi.json');
    const updatable = Object.entries(doc.body.paths as Record<string, Record<string, unknown>>)
      .filter(([, methods]) => 'patch' in methods)
      .map(([path]) => path.replace(/\/\{id\}$/, ''));
    expect(updatable.sort()).toEqual(UPDATABLE.map((u) => u.path).sort());
  });

  it.each(UPDATABLE)(
    '$path: the same id in a PATCH body updates',
    async ({ path, create, patch }) => {
      const resource = await create(api);
      const id = resource.id as string;
      const updated = await api.call('PATCH', `${path}/${id}`, { id, ...patch });
      expect(updated.status, JSON.stringify(updated.body)).toBe(200);
      expect(updated.body).toMatchObject({ id, ...patch });
    },
  );

  it.each(UPDATABLE)(
    '$path: another id in a PATCH body is a 400 that names both, and changes nothing',
    async ({ path, create, patch }) => {
      const resource = await create(api);
      const id = resource.id as string;
      const other = `${id.split('_')[0]}_someoneelse`;
      const res = await api.call('PATCH', `${path}/${id}`, { id: other, ...patch });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error_code: 'ERR_NGROK_215', details: { field: 'id' } });
      expect(res.body.msg).toContain(id);
      expect(res.body.msg).toContain(other);
      const after = await api.call('GET', `${path}/${id}`);
      expect(after.status).toBe(200);
      for (const [field, value] of Object.entries(patch)) {
        expect(after.body[field]).toEqual(resource[field]);
        expect(after.body[field]).not.toEqual(value);
      }
    },
  );
});
