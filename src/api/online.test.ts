import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ID_PREFIX, newId } from '../core/ids.js';
import { AgentCommandError } from '../edge/sessions/agent-commands.js';
import {
  TunnelRegistry,
  type OnlineSession,
  type OnlineTunnel,
} from '../edge/registry/tunnel-registry.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { onlineStateOf } from './online.js';

function fakeSession(calls: string[], overrides: Partial<OnlineSession> = {}): OnlineSession {
  return {
    id: newId(ID_PREFIX.tunnelSession),
    credentialId: 'cr_2f0000000000000000000000000',
    ip: '198.51.100.4',
    metadata: '{"site":"a"}',
    os: 'linux',
    agentVersion: '1.7.0',
    transport: 'ngrok/2',
    startedAt: '2026-01-02T03:04:05Z',
    region: 'local',
    stop: async () => void calls.push('stop'),
    restart: async () => void calls.push('restart'),
    close: () => undefined,
    ...overrides,
  };
}

function fakeTunnel(sessionId: string, fields: Partial<OnlineTunnel>): OnlineTunnel {
  const id = newId(ID_PREFIX.tunnel);
  return {
    id,
    sessionId,
    bindId: id,
    proto: undefined,
    url: undefined,
    forwardsTo: 'localhost:3000',
    metadata: '',
    startedAt: '2026-01-02T03:04:06Z',
    connect: () => Promise.reject(new Error('not in this test')),
    ...fields,
  };
}

describe.each(DATABASE_KINDS)('online views: tunnel sessions, tunnels, endpoints (%s)', (kind) => {
  let api: TestApi;
  const registry = new TunnelRegistry();
  const calls: string[] = [];

  beforeAll(async () => {
    api = await createTestApi(kind, { online: onlineStateOf(registry) });
  });
  afterAll(async () => api.close());

  it('lists nothing while nothing is online', async () => {
    for (const key of ['tunnel_sessions', 'tunnels', 'endpoints']) {
      const res = await api.call('GET', `/${key}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ [key]: [], uri: `${TEST_BASE_URL}/${key}`, next_page_uri: null });
    }
  });

  it('shows online sessions, newest first, paged, and 404 for unknown ids', async () => {
    const older = fakeSession(calls);
    const newer = fakeSession(calls, { transport: 'burrow/1' });
    registry.addSession(older);
    registry.addSession(newer);
    const one = await api.call('GET', `/tunnel_sessions/${older.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual({
      id: older.id,
      uri: `${TEST_BASE_URL}/tunnel_sessions/${older.id}`,
      agent_version: '1.7.0',
      credential: {
        id: older.credentialId,
        uri: `${TEST_BASE_URL}/credentials/${older.credentialId}`,
      },
      ip: '198.51.100.4',
      metadata: '{"site":"a"}',
      os: 'linux',
      region: 'local',
      started_at: '2026-01-02T03:04:05Z',
      transport: 'ngrok/2',
      node_id: '',
    });
    const first = await api.call('GET', '/tunnel_sessions?limit=1');
    expect(first.body.tunnel_sessions.map((s: { id: string }) => s.id)).toEqual([newer.id]);
    expect(first.body.next_page_uri).toBe(
      `${TEST_BASE_URL}/tunnel_sessions?before_id=${newer.id}&limit=1`,
    );
    const second = await api.call('GET', `/tunnel_sessions?before_id=${newer.id}&limit=1`);
    expect(second.body.tunnel_sessions.map((s: { id: string }) => s.id)).toEqual([older.id]);
    expect(second.body.next_page_uri).toBeNull();
    const missing = await api.call('GET', '/tunnel_sessions/ts_0000000000000000000000000000');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });
    const badLimit = await api.call('GET', '/tunnel_sessions?limit=0');
    expect(badLimit.body.error_code).toBe('ERR_NGROK_233');
  });

  it('sends Stop and Restart to the agent (204) and reports what the agent could not do', async () => {
    const session = fakeSession(calls);
    registry.addSession(session);
    calls.length = 0;
    const stop = await api.call('POST', `/tunnel_sessions/${session.id}/stop`, {});
    expect(stop.status).toBe(204);
    expect(stop.body).toBeUndefined();
    expect((await api.call('POST', `/tunnel_sessions/${session.id}/restart`)).status).toBe(204);
    expect(calls).toEqual(['stop', 'restart']);
    const stubborn = fakeSession(calls, {
      stop: () =>
        Promise.reject(
          new AgentCommandError(
            'ERR_NGROK_805',
            400,
            'This agent does not support remote stopping: x.',
          ),
        ),
    });
    registry.addSession(stubborn);
    const refused = await api.call('POST', `/tunnel_sessions/${stubborn.id}/stop`);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      error_code: 'ERR_NGROK_805',
      msg: expect.stringMatching(/remote stopping/),
    });
    expect((await api.call('POST', '/tunnel_sessions/ts_nope/stop')).status).toBe(404);
    const unknownField = await api.call('POST', `/tunnel_sessions/${session.id}/stop`, {
      force: true,
    });
    expect(unknownField.body.error_code).toBe('ERR_NGROK_214');
  });

  it('shows addressed and labeled tunnels, and endpoints of the addressed ones', async () => {
    const session = fakeSession(calls);
    registry.addSession(session);
    const { body: domain } = await api.call('POST', '/reserved_domains', {
      domain: 'app.example.com',
    });
    const { body: backend } = await api.call('POST', '/backends/tunnel_group', {
      labels: { edge: 'e1' },
    });
    const https = fakeTunnel(session.id, {
      proto: 'https',
      url: 'https://app.example.com:8443',
      hostname: 'app.example.com',
      domainId: domain.id,
      metadata: 'm',
    });
    const tcp = fakeTunnel(session.id, {
      proto: 'tcp',
      url: 'tcp://tcp.burrow.test:20007',
      port: 20007,
    });
    const labeled = fakeTunnel(session.id, { labels: { edge: 'e1', app: 'x' } });
    for (const t of [https, tcp, labeled]) registry.addTunnel(t);
    const sessionRef = { id: session.id, uri: `${TEST_BASE_URL}/tunnel_sessions/${session.id}` };
    const epId = `ep_${https.id.slice(3)}`;

    expect((await api.call('GET', `/tunnels/${https.id}`)).body).toEqual({
      id: https.id,
      uri: `${TEST_BASE_URL}/tunnels/${https.id}`,
      public_url: 'https://app.example.com:8443',
      started_at: '2026-01-02T03:04:06Z',
      metadata: 'm',
      proto: 'https',
      region: 'local',
      tunnel_session: sessionRef,
      endpoint: { id: epId, uri: `${TEST_BASE_URL}/endpoints/${epId}` },
      forwards_to: 'localhost:3000',
    });
    const lab = (await api.call('GET', `/tunnels/${labeled.id}`)).body;
    expect(lab).toMatchObject({ labels: { edge: 'e1', app: 'x' }, backends: [{ id: backend.id }] });
    expect(lab).not.toHaveProperty('public_url');
    expect(lab).not.toHaveProperty('endpoint');
    const list = await api.call('GET', '/tunnels');
    expect(list.body.tunnels.map((t: { id: string }) => t.id)).toEqual([
      labeled.id,
      tcp.id,
      https.id,
    ]);
    expect((await api.call('GET', `/backends/tunnel_group/${backend.id}`)).body.tunnels).toEqual([
      { id: labeled.id, uri: `${TEST_BASE_URL}/tunnels/${labeled.id}` },
    ]);

    const endpoints = await api.call('GET', '/endpoints');
    expect(endpoints.body.endpoints.map((e: { id: string }) => e.id)).toEqual([
      `ep_${tcp.id.slice(3)}`,
      epId,
    ]);
    expect((await api.call('GET', `/endpoints/${epId}`)).body).toMatchObject({
      id: epId,
      type: 'ephemeral',
      url: 'https://app.example.com:8443',
      proto: 'https',
      hostport: 'app.example.com:8443',
      host: 'app.example.com',
      port: 8443,
      domain: { id: domain.id, uri: `${TEST_BASE_URL}/reserved_domains/${domain.id}` },
      tcp_addr: null,
      tunnel: { id: https.id, uri: `${TEST_BASE_URL}/tunnels/${https.id}` },
      tunnel_session: sessionRef,
      edge: null,
      upstream_url: 'localhost:3000',
    });
    expect(endpoints.body.endpoints[0]).toMatchObject({
      hostport: 'tcp.burrow.test:20007',
      port: 20007,
    });
    expect((await api.call('GET', `/endpoints/ep_${labeled.id.slice(3)}`)).status).toBe(404);
    registry.removeTunnel(https.id);
    expect((await api.call('GET', `/tunnels/${https.id}`)).status).toBe(404);
  });

  it('pages endpoints online and cloud endpoints in the store together, newest first', async () => {
    const session = fakeSession(calls);
    registry.addSession(session);
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = fakeTunnel(session.id, { proto: 'tcp', url: `tcp://tcp.burrow.test:2100${i}` });
      registry.addTunnel(t);
      created.push(`ep_${t.id.slice(3)}`);
      const policy = JSON.stringify({ on_http_request: [{ actions: [{ type: 'deny' }] }] });
      const cloud = await api.call('POST', '/endpoints', {
        type: 'cloud',
        url: `https://page${i}.burrow.test`,
        traffic_policy: policy,
      });
      expect(cloud.status, JSON.stringify(cloud.body)).toBe(201);
      created.push(cloud.body.id as string);
    }
    const listed: string[] = [];
    let next: string | null = '/endpoints?limit=3';
    while (next) {
      const res = await api.call('GET', next.replace(TEST_BASE_URL, ''));
      listed.push(...res.body.endpoints.map((e: { id: string }) => e.id));
      next = res.body.next_page_uri;
    }
    const ours = listed.filter((id) => created.includes(id));
    expect(ours).toEqual([...created].sort().reverse());
    expect(new Set(listed).size).toBe(listed.length);
  });
});
