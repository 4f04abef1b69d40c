import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { trafficRequest } from '../../test/support/traffic-records.js';
import { TrafficLog } from '../edge/metrics/traffic-log.js';

/** A viewer reads the traffic inspector, but never visitors' credentials shown on purpose. */
describe('traffic inspector and roles', () => {
  const log = new TrafficLog();
  let api: TestApi;
  let viewerKey = '';
  beforeAll(async () => {
    api = await createTestApi('sqlite', {
      online: {
        tunnelsMatching: () => [],
        traffic: { log, replay: async () => ({ status: 204, omittedHeaders: [] }) },
      },
    });
    const viewer = await api.repos.users.create('vic', 'viewer password', 'viewer');
    viewerKey = (await api.repos.apiKeys.create({ owner_id: viewer.id })).token!;
  });
  afterAll(async () => api.close());

  const request = (host: string) =>
    log.add(
      trafficRequest(host, {
        scheme: 'https',
        requestHeaders: ['host', host, 'authorization', 'Bearer visitor-secret'],
        status: 200,
        durationMs: 1,
      }),
    );

  it('shows a viewer redacted requests, refuses those recorded with credentials shown', async () => {
    const as = { authorization: `Bearer ${viewerKey}` };
    const redacted = request('plain.example.com');
    const plain = await api.call('GET', `/traffic/${redacted.id}`, undefined, as);
    expect(plain.status).toBe(200);
    expect(JSON.stringify(plain.body)).not.toContain('visitor-secret');

    log.setCredentialsShown('debug.example.com', true);
    const shown = request('debug.example.com');
    const refused = await api.call('GET', `/traffic/${shown.id}`, undefined, as);
    expect(refused.status).toBe(403);
    expect(refused.body.error_code).toBe('ERR_BURROW_PERMISSION_DENIED');
    expect(JSON.stringify(refused.body)).not.toContain('visitor-secret');
    // The admin who chose to show them sees them.
    const admin = await api.call('GET', `/traffic/${shown.id}`);
    expect(JSON.stringify(admin.body)).toContain('visitor-secret');
    // Nor does a key of an admin scoped to reading traffic: showing them is traffic:write.
    const reader = await api.call('POST', '/api_keys', { scopes: ['traffic:read'] });
    const asReader = { authorization: `Bearer ${reader.body.token as string}` };
    expect((await api.call('GET', `/traffic/${redacted.id}`, undefined, asReader)).status).toBe(
      200,
    );
    const scoped = await api.call('GET', `/traffic/${shown.id}`, undefined, asReader);
    expect(scoped.status).toBe(403);
    expect(scoped.body.details).toMatchObject({ required: 'traffic:write', role: 'admin' });
    expect(JSON.stringify(scoped.body)).not.toContain('visitor-secret');
    // Replaying is a change: not a viewer's.
    expect((await api.call('POST', `/traffic/${redacted.id}/replay`, {}, as)).status).toBe(403);
  });
});
