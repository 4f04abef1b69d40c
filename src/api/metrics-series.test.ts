import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { TrafficSeries } from '../edge/metrics/traffic-series.js';

const URL = 'https://app.burrow.test';

describe('GET /metrics/series', () => {
  const series = new TrafficSeries({ agents: () => 2 });
  let api: TestApi;
  let bare: TestApi;
  let viewerKey = '';
  beforeAll(async () => {
    api = await createTestApi('sqlite', {
      online: { tunnelsMatching: () => [], series, nodeId: 'nd_test' },
    });
    bare = await createTestApi('sqlite');
    const viewer = await api.repos.users.create('vic', 'viewer password', 'viewer');
    viewerKey = (await api.repos.apiKeys.create({ owner_id: viewer.id })).token!;
    const app = series.of(URL);
    app.request(200, 0.01);
    app.request(503, 0.2);
    app.bytesOut(300);
    series.of('https://other.burrow.test').request(404, 0.001);
  });
  afterAll(async () => {
    await api.close();
    await bare.close();
  });

  it("answers an endpoint's last hour, and a viewer may read it", async () => {
    const res = await api.call(
      'GET',
      `/metrics/series?endpoint=${encodeURIComponent(URL)}`,
      undefined,
      { authorization: `Bearer ${viewerKey}` },
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      available: true,
      node_id: 'nd_test',
      range: 'hour',
      step_seconds: 10,
      endpoint: URL,
      endpoints: ['https://app.burrow.test', 'https://other.burrow.test'],
      totals: { requests: 2, status: { '2xx': 1, '5xx': 1 }, bytes_out: 300 },
    });
    expect(res.body.time).toHaveLength(360);
    expect(res.body.agents_online.at(-1)).toBe(2);
  });

  it("answers the node's total for the day", async () => {
    const res = await api.call('GET', '/metrics/series?range=day');
    expect(res.status).toBe(200);
    expect(res.body.endpoint).toBeNull();
    expect(res.body.time).toHaveLength(288);
    expect(res.body.totals.requests).toBe(3);
    expect(res.body.totals.status['4xx']).toBe(1);
  });

  it('refuses another range, and answers unavailable without an edge', async () => {
    expect((await api.call('GET', '/metrics/series?range=week')).status).toBe(400);
    const res = await bare.call('GET', '/metrics/series');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ available: false, endpoints: [], totals: null });
  });

  it('is not public like /metrics', async () => {
    const res = await api.call('GET', '/metrics/series', undefined, { authorization: undefined });
    expect(res.status).toBe(401);
  });
});
