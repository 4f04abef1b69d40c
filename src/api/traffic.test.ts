import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { trafficRequest } from '../../test/support/traffic-records.js';
import { TrafficLog } from '../edge/metrics/traffic-log.js';
import { configureIpIntelligence } from '../policy/index.js';

describe('traffic inspector API', () => {
  const log = new TrafficLog();
  const replayed: string[] = [];
  let api: TestApi;
  let bare: TestApi;
  beforeAll(async () => {
    api = await createTestApi('sqlite', {
      online: {
        tunnelsMatching: () => [],
        traffic: {
          log,
          replay: async (record) => {
            replayed.push(record.id);
            return { status: 204, omittedHeaders: ['authorization'] };
          },
        },
      },
    });
    bare = await createTestApi('sqlite');
  });
  afterAll(async () => {
    await api.close();
    await bare.close();
  });

  it('lists, shows and replays recorded requests, and switches capture per host', async () => {
    const record = log.add(
      trafficRequest('App.example.com', {
        scheme: 'https',
        startedAt: Date.parse('2026-01-02T03:04:05Z'),
        path: '/hello',
        requestHeaders: ['host', 'app.example.com'],
        status: 200,
        durationMs: 1.25,
      }),
    );

    const list = await api.call('GET', `/traffic?host=app.example.com&limit=10`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ available: true, requests: [{ id: record.id }] });
    expect((await api.call('GET', `/traffic?after=${record.id}`)).body.requests).toEqual([]);
    expect((await api.call('GET', '/traffic?limit=lots')).status).toBe(400);

    const one = await api.call('GET', `/traffic/${record.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: record.id, path: '/hello', duration_ms: 1.3 });
    expect((await api.call('GET', '/traffic/tr_999')).status).toBe(404);

    const replay = await api.call('POST', `/traffic/${record.id}/replay`, {});
    expect(replay.status).toBe(201);
    expect(replay.body).toEqual({
      replay_of: record.id,
      status: 204,
      omitted_headers: ['authorization'],
    });
    expect(replayed).toEqual([record.id]);
    expect((await api.call('POST', '/traffic/tr_999/replay', {})).status).toBe(404);

    const capture = await api.call('PUT', '/traffic/capture/App.example.com', { enabled: true });
    expect(capture.body).toEqual({
      host: 'app.example.com',
      enabled: true,
      unanswered_nodes: [],
    });
    expect(log.capturedHosts()).toContain('app.example.com');
    expect((await api.call('PUT', '/traffic/capture/a%20b', { enabled: true })).status).toBe(400);
    expect((await api.call('PUT', '/traffic/capture/a.example', { enabled: 'yes' })).status).toBe(
      400,
    );
  });

  it('shows credentials per host only once switched on, from then on', async () => {
    const request = (host: string) =>
      log.add(
        trafficRequest(host, {
          requestHeaders: [
            'Host',
            host,
            'Authorization',
            'Bearer hunter2',
            'Cookie',
            'sid=hunter2',
          ],
        }),
      );
    const before = request('creds.example.com');
    const redacted = await api.call('GET', `/traffic/${before.id}`);
    expect(JSON.stringify(redacted.body)).not.toContain('hunter2');
    expect(redacted.body).toMatchObject({
      credentials_shown: false,
      request_headers: [
        ['Host', 'creds.example.com'],
        ['Authorization', 'Bearer [redacted, 7 chars]'],
        ['Cookie', 'sid=[redacted, 7 chars]'],
      ],
    });

    const on = await api.call('PUT', '/traffic/credentials/Creds.example.com', { shown: true });
    expect(on.body).toEqual({ host: 'creds.example.com', shown: true, unanswered_nodes: [] });
    const list = await api.call('GET', '/traffic');
    expect(list.body.credentials_shown_hosts).toEqual(['creds.example.com']);
    expect(list.body.redacted_headers).toEqual([
      'authorization',
      'cookie',
      'proxy-authorization',
      'set-cookie',
    ]);
    // Switching on shows what comes from now on; what was redacted stays redacted.
    expect(JSON.stringify((await api.call('GET', `/traffic/${before.id}`)).body)).not.toContain(
      'hunter2',
    );
    const after = await api.call('GET', `/traffic/${request('creds.example.com').id}`);
    expect(after.body.credentials_shown).toBe(true);
    expect(after.body.request_headers).toContainEqual(['Authorization', 'Bearer hunter2']);

    expect((await api.call('PUT', '/traffic/credentials/a.example', { shown: 1 })).status).toBe(
      400,
    );
    expect((await api.call('PUT', '/traffic/credentials/a%20b', { shown: true })).status).toBe(400);
    await api.call('PUT', '/traffic/credentials/creds.example.com', { shown: false });
    const off = await api.call('GET', `/traffic/${request('creds.example.com').id}`);
    expect(JSON.stringify(off.body)).not.toContain('hunter2');
  });

  it("shows what IP intelligence knows of a request's client, looked up when shown", async () => {
    const record = log.add(trafficRequest('geo.example.com', { clientIp: '192.0.2.7' }));
    const other = log.add(trafficRequest('geo.example.com', { clientIp: '198.51.100.9' }));
    configureIpIntelligence({
      lookup: (ip) =>
        ip === '192.0.2.7'
          ? { country_code: 'FR', city: 'Lyon', as_number: 64500, as_organization: 'Example' }
          : undefined,
    });
    try {
      expect((await api.call('GET', `/traffic/${record.id}`)).body.client_geo).toEqual({
        country_code: 'FR',
        subdivision: '',
        city: 'Lyon',
        as_number: 64500,
        as_organization: 'Example',
      });
      expect((await api.call('GET', `/traffic/${other.id}`)).body).not.toHaveProperty('client_geo');
    } finally {
      configureIpIntelligence(undefined);
    }
  });

  it('lists nothing and refuses capture in a process without an edge', async () => {
    expect((await bare.call('GET', '/traffic')).body).toEqual({
      available: false,
      requests: [],
      hosts: [],
      captured_hosts: [],
      credentials_shown_hosts: [],
      redacted_headers: [],
      unanswered_nodes: [],
    });
    expect((await bare.call('GET', '/traffic/tr_1')).status).toBe(404);
    const capture = await bare.call('PUT', '/traffic/capture/a.example', { enabled: true });
    expect(capture.status).toBe(409);
    const shown = await bare.call('PUT', '/traffic/credentials/a.example', { shown: true });
    expect(shown.status).toBe(409);
  });
});
