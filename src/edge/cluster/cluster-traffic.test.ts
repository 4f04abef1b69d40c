import { describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { fakeTrafficPeers, notingInspector } from '../../../test/support/traffic-peers.js';
import { clusterTrafficId, clusterTrafficView, parseClusterTrafficId } from './cluster-traffic.js';

const inspector = notingInspector;
const cluster = fakeTrafficPeers;

describe('the cluster traffic inspector', () => {
  it('names records by node, and reads a bare id as this node’s', () => {
    expect(clusterTrafficId('edge-b', 'tr_12')).toBe('tr_edge-b_12');
    expect(parseClusterTrafficId('tr_edge_b_12', 'edge-a')).toEqual({
      node: 'edge_b',
      localId: 'tr_12',
      seq: 12,
    });
    expect(parseClusterTrafficId('tr_7', 'edge-a')).toMatchObject({ node: 'edge-a', seq: 7 });
    expect(parseClusterTrafficId('tr_-x_1', 'edge-a')).toBeUndefined();
    expect(parseClusterTrafficId('tn_1', 'edge-a')).toBeUndefined();
  });

  it('merges every node’s records newest first, pages after a cursor, and unions the hosts', async () => {
    const a = inspector();
    const b = inspector();
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    a.log.add(trafficRequest('a.test', { startedAt: t0 + 1, path: '/a1' }));
    b.log.add(trafficRequest('b.test', { startedAt: t0 + 2, path: '/b1' }));
    a.log.add(trafficRequest('a.test', { startedAt: t0 + 3, path: '/a2' }));
    b.log.add(trafficRequest('b.test', { startedAt: t0 + 4, path: '/b2' }));
    a.log.setCapture('a.test', true);
    const { node } = cluster({ 'edge-b': b });
    const view = clusterTrafficView({ node, local: a });

    const all = await view.list({ limit: 100 });
    expect(all.requests.map((r) => [r.id, r.node, r.path])).toEqual([
      ['tr_edge-b_2', 'edge-b', '/b2'],
      ['tr_edge-a_2', 'edge-a', '/a2'],
      ['tr_edge-b_1', 'edge-b', '/b1'],
      ['tr_edge-a_1', 'edge-a', '/a1'],
    ]);
    expect(all).toMatchObject({ available: true, unanswered: [], capturedHosts: ['a.test'] });
    expect(all.hosts.sort()).toEqual(['a.test', 'b.test']);

    expect((await view.list({ limit: 2 })).requests.map((r) => r.path)).toEqual(['/b2', '/a2']);
    // After B's first record: A's second and B's second, whichever node they are on.
    const after = await view.list({ after: 'tr_edge-b_1', limit: 100 });
    expect(after.requests.map((r) => r.path)).toEqual(['/b2', '/a2']);
    expect((await view.list({ after: 'tr_edge-a_2', limit: 100 })).requests).toHaveLength(1);
    expect((await view.list({ host: 'a.test', limit: 100 })).requests).toHaveLength(2);
    await expect(view.list({ after: 'tr_edge-b_99', limit: 100 })).rejects.toThrow(
      /no longer kept/,
    );
  });

  it('fetches a record from the node that holds it, bodies and redaction intact', async () => {
    const a = inspector();
    const b = inspector();
    b.log.setCredentialsShown('b.test', true);
    const original = b.log.add(
      trafficRequest('b.test', {
        requestHeaders: ['Authorization', 'Bearer secret'],
        requestBody: { bytes: Buffer.from([0, 1, 2, 255]), size: 4, truncated: false },
      }),
    );
    b.log.answer(original, {
      status: 201,
      responseHeaders: ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'Content-Length', '2'],
      durationMs: 1.5,
      requestBody: original.requestBody,
      responseBody: { bytes: Buffer.from('ok'), size: 2, truncated: false },
    });
    b.log.add(trafficRequest('b.test', { replayOf: original.id }));
    const { node } = cluster({ 'edge-b': b });
    const view = clusterTrafficView({ node, local: a });

    const got = await view.get('tr_edge-b_1');
    expect(got).toMatchObject({
      id: 'tr_edge-b_1',
      status: 201,
      credentialsShown: true,
      requestHeaders: ['Authorization', 'Bearer secret'],
      responseHeaders: ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'Content-Length', '2'],
    });
    expect(got!.requestBody!.bytes.equals(Buffer.from([0, 1, 2, 255]))).toBe(true);
    expect((await view.get('tr_edge-b_2'))?.replayOf).toBe('tr_edge-b_1');
    expect(await view.get('tr_edge-b_9')).toBeUndefined();
    expect(await view.get('tr_edge-z_1')).toBeUndefined();

    expect(await view.replay(got!)).toEqual({ status: 200, omittedHeaders: ['authorization'] });
    expect(b.replayed).toEqual(['tr_1']);
    expect(a.replayed).toEqual([]);
  });

  it('names the nodes that did not answer, and still serves the others', async () => {
    const a = inspector();
    const b = inspector();
    const c = inspector();
    c.log.add(trafficRequest('c.test'));
    const { node } = cluster({ 'edge-b': b, 'edge-c': c }, new Set(['edge-b']));
    const view = clusterTrafficView({ node, local: a });
    const list = await view.list({ limit: 100 });
    expect(list.requests.map((r) => r.node)).toEqual(['edge-c']);
    expect(list.unanswered).toEqual([
      { node: 'edge-b', message: 'node edge-b: no reply within 2000 ms' },
    ]);
    expect(await view.setCapture('c.test', true)).toEqual([
      { node: 'edge-b', message: 'node edge-b: no reply within 2000 ms' },
    ]);
    expect(a.log.capturedHosts()).toEqual(['c.test']);
    expect(c.log.capturedHosts()).toEqual(['c.test']);
    await view.setCredentialsShown('c.test', true);
    expect(c.log.credentialsShownHosts()).toEqual(['c.test']);
    await expect(view.get('tr_edge-b_1')).rejects.toThrow(/edge-b/);
  });

  it('on an API-only node: only the peers, and nothing available without any', async () => {
    const b = inspector();
    b.log.add(trafficRequest('b.test'));
    const withPeer = clusterTrafficView({ node: cluster({ 'edge-b': b }).node, local: undefined });
    expect((await withPeer.list({ limit: 100 })).requests.map((r) => r.id)).toEqual([
      'tr_edge-b_1',
    ]);
    const alone = clusterTrafficView({ node: cluster({}).node, local: undefined });
    expect(await alone.list({ limit: 100 })).toMatchObject({ available: false, requests: [] });
  });
});
