import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { trafficRequest } from '../../test/support/traffic-records.js';
import { fakeTrafficPeers, notingInspector } from '../../test/support/traffic-peers.js';
import { clusterTrafficView } from '../edge/cluster/cluster-traffic.js';

/**
 * `/traffic` on an API-only node of a cluster: edge-b's records, asked of it as over a node link,
 * with the roles of one node; edge-c does not answer and is named.
 */
describe('traffic inspector API over a cluster', () => {
  const b = notingInspector();
  let api: TestApi;
  let viewerKey = '';
  beforeAll(async () => {
    const { node } = fakeTrafficPeers(
      { 'edge-b': b, 'edge-c': notingInspector() },
      new Set(['edge-c']),
      'api-1',
    );
    api = await createTestApi('sqlite', {
      online: {
        tunnelsMatching: () => [],
        trafficView: clusterTrafficView({ node, local: undefined }),
      },
    });
    const viewer = await api.repos.users.create('vic', 'viewer password', 'viewer');
    viewerKey = (await api.repos.apiKeys.create({ owner_id: viewer.id })).token!;
  });
  afterAll(async () => api.close());

  const request = (host: string) =>
    b.log.add(
      trafficRequest(host, {
        requestHeaders: ['host', host, 'authorization', 'Bearer visitor-secret'],
        status: 200,
      }),
    );

  it('lists, opens and replays another node’s requests, naming the node that did not answer', async () => {
    const record = request('b.example.com');
    const list = await api.call('GET', '/traffic');
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({
      available: true,
      requests: [{ id: 'tr_edge-b_1', node_id: 'edge-b', host: 'b.example.com' }],
      hosts: ['b.example.com'],
      unanswered_nodes: [{ node_id: 'edge-c', error: 'node edge-c: no reply within 2000 ms' }],
    });
    const one = await api.call('GET', '/traffic/tr_edge-b_1');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: 'tr_edge-b_1', node_id: 'edge-b' });
    expect(JSON.stringify(one.body)).not.toContain('visitor-secret');

    const replay = await api.call('POST', '/traffic/tr_edge-b_1/replay', {});
    expect(replay.status).toBe(201);
    expect(replay.body).toEqual({
      replay_of: 'tr_edge-b_1',
      status: 200,
      omitted_headers: ['authorization'],
    });
    expect(b.replayed).toEqual([record.id]);

    expect((await api.call('GET', '/traffic/tr_edge-b_99')).status).toBe(404);
    expect((await api.call('GET', '/traffic/tr_edge-z_1')).status).toBe(404);
    const silent = await api.call('GET', '/traffic/tr_edge-c_1');
    expect(silent.status).toBe(504);
    expect(silent.body.error_code).toBe('ERR_BURROW_NODE_CONNECT_TIMEOUT');
    expect((await api.call('GET', '/traffic?after=tr_edge-b_99')).status).toBe(400);
    expect((await api.call('GET', '/traffic?after=tr_edge-b_1')).body.requests).toEqual([]);

    const capture = await api.call('PUT', '/traffic/capture/b.example.com', { enabled: true });
    expect(capture.body).toMatchObject({
      enabled: true,
      unanswered_nodes: [{ node_id: 'edge-c' }],
    });
    expect(b.log.capturedHosts()).toEqual(['b.example.com']);
  });

  it('keeps credentials shown on another node from a viewer, as on one node', async () => {
    const as = { authorization: `Bearer ${viewerKey}` };
    const on = await api.call('PUT', '/traffic/credentials/debug.example.com', { shown: true });
    expect(on.status).toBe(200);
    const shown = request('debug.example.com');
    const id = `tr_edge-b_${shown.seq}`;
    const refused = await api.call('GET', `/traffic/${id}`, undefined, as);
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).not.toContain('visitor-secret');
    expect(JSON.stringify((await api.call('GET', `/traffic/${id}`)).body)).toContain(
      'visitor-secret',
    );
    expect((await api.call('POST', `/traffic/${id}/replay`, {}, as)).status).toBe(403);
  });
});
