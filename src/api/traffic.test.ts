import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { TrafficLog } from '../edge/metrics/traffic-log.js';

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
            return { status: 204 };
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
    const record = log.add({
      host: 'App.example.com',
      tunnelId: 'tn_1',
      scheme: 'https',
      startedAt: Date.parse('2026-01-02T03:04:05Z'),
      method: 'GET',
      path: '/hello',
      clientIp: '198.51.100.4',
      requestHeaders: ['host', 'app.example.com'],
      status: 200,
      responseHeaders: {},
      durationMs: 1.25,
      requestBody: undefined,
      responseBody: undefined,
      replayOf: undefined,
    });

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
    expect(replay.body).toEqual({ replay_of: record.id, status: 204 });
    expect(replayed).toEqual([record.id]);
    expect((await api.call('POST', '/traffic/tr_999/replay', {})).status).toBe(404);

    const capture = await api.call('PUT', '/traffic/capture/App.example.com', { enabled: true });
    expect(capture.body).toEqual({ host: 'app.example.com', enabled: true });
    expect(log.capturedHosts()).toContain('app.example.com');
    expect((await api.call('PUT', '/traffic/capture/a%20b', { enabled: true })).status).toBe(400);
    expect((await api.call('PUT', '/traffic/capture/a.example', { enabled: 'yes' })).status).toBe(
      400,
    );
  });

  it('lists nothing and refuses capture in a process without an edge', async () => {
    expect((await bare.call('GET', '/traffic')).body).toEqual({
      available: false,
      requests: [],
      hosts: [],
      captured_hosts: [],
    });
    expect((await bare.call('GET', '/traffic/tr_1')).status).toBe(404);
    const capture = await bare.call('PUT', '/traffic/capture/a.example', { enabled: true });
    expect(capture.status).toBe(409);
  });
});
