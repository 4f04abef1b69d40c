import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePolicy, PolicyEventLog } from '../policy/index.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { CONN_TLS12, CONN_TLS13, TLS_SAMPLE_POLICY } from '../../test/support/policy-fixtures.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

/** A policy whose expression names a field conn does not have. */
const BAD_EXPRESSION = JSON.stringify({
  on_tcp_connect: [
    {
      name: 'Block IP',
      expressions: ["conn.clientip == '192.0.2.0'"],
      actions: [{ type: 'deny' }],
    },
  ],
});

describe.each(DATABASE_KINDS)('edge traffic policies through the API (%s)', (kind) => {
  let api: TestApi;
  const events = new PolicyEventLog();
  beforeAll(async () => {
    api = await createTestApi(kind, {
      online: { tunnelsMatching: () => [], policyEvents: events },
    });
  });
  afterAll(async () => api.close());

  const newEdge = async (type: 'tcp' | 'tls') => {
    const res = await api.call('POST', `/edges/${type}`, {});
    expect(res.status).toBe(201);
    return res.body.id as string;
  };

  describe('validation when saved', () => {
    it('refuses a bad expression with 400 ERR_NGROK_2200 naming the rule, and stores nothing', async () => {
      const id = await newEdge('tls');
      const put = await api.call('PUT', `/edges/tls/${id}/traffic_policy`, {
        value: BAD_EXPRESSION,
      });
      expect(put.status).toBe(400);
      expect(put.body).toMatchObject({
        error_code: 'ERR_NGROK_2200',
        status_code: 400,
        details: { field: 'value' },
      });
      expect(put.body.msg).toMatch(
        /^value: phase on_tcp_connect, rule 0 \("Block IP"\): expressions\[0\] "conn\.clientip == '192\.0\.2\.0'" is not a valid expression: No such key: clientip/,
      );
      expect((await api.call('GET', `/edges/tls/${id}/traffic_policy`)).status).toBe(404);
    });

    it('refuses it in edge create and PATCH bodies too, naming traffic_policy.value', async () => {
      const create = await api.call('POST', '/edges/tcp', {
        traffic_policy: { value: BAD_EXPRESSION },
      });
      expect(create.status).toBe(400);
      expect(create.body).toMatchObject({
        error_code: 'ERR_NGROK_2200',
        details: { field: 'traffic_policy.value' },
      });
      const id = await newEdge('tcp');
      const patch = await api.call('PATCH', `/edges/tcp/${id}`, {
        traffic_policy: { value: BAD_EXPRESSION },
      });
      expect(patch.status).toBe(400);
      expect(patch.body.error_code).toBe('ERR_NGROK_2200');
      expect((await api.call('GET', `/edges/tcp/${id}`)).body.traffic_policy).toBeNull();
    });

    it('refuses HTTP phases (2230) and HTTP actions (2205) on TCP and TLS edges', async () => {
      const tcp = await newEdge('tcp');
      const phase = await api.call('PUT', `/edges/tcp/${tcp}/traffic_policy`, {
        value: '{"on_http_request":[{"actions":[{"type":"deny"}]}]}',
      });
      expect(phase.status).toBe(400);
      expect(phase.body.error_code).toBe('ERR_NGROK_2230');
      expect(phase.body.msg).toMatch(
        /Invalid Traffic Policy phase on_http_request for protocol tcp/,
      );
      const tls = await newEdge('tls');
      const action = await api.call('PUT', `/edges/tls/${tls}/traffic_policy`, {
        value: 'on_tcp_connect:\n  - actions: [{type: add-headers, config: {headers: {a: b}}}]\n',
      });
      expect(action.status).toBe(400);
      expect(action.body.error_code).toBe('ERR_NGROK_2205');
      expect(action.body.msg).toMatch(/not supported for protocol tls/);
    });

    it('accepts the TLS-edge sample', async () => {
      const id = await newEdge('tls');
      const put = await api.call('PUT', `/edges/tls/${id}/traffic_policy`, {
        value: TLS_SAMPLE_POLICY,
      });
      expect(put.status).toBe(200);
      expect(put.body).toEqual({ enabled: true, value: TLS_SAMPLE_POLICY });
    });
  });

  describe('GET /edges/{tcp|tls}/{id}/traffic_policy/events', () => {
    it('serves the events the edge recorded for that edge, newest first', async () => {
      const id = await newEdge('tls');
      const runner = compilePolicy(TLS_SAMPLE_POLICY, { protocol: 'tls' }).bind({
        ownerId: id,
        events,
      });
      expect(runner.onTcpConnect({ conn: CONN_TLS12 })).toMatchObject({ kind: 'continue' });
      expect(runner.onTcpConnect({ conn: CONN_TLS13 })).toMatchObject({ kind: 'close' });
      const res = await api.call('GET', `/edges/tls/${id}/traffic_policy/events`);
      expect(res.status).toBe(200);
      expect(res.body.uri).toBe(`${TEST_BASE_URL}/edges/tls/${id}/traffic_policy/events`);
      expect(res.body.events.map((e: { outcome: string }) => e.outcome)).toEqual(['denied', 'log']);
      expect(res.body.events[1]).toEqual({
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        owner_id: id,
        phase: 'on_tcp_connect',
        rule: { index: 0, name: 'AllowTLS1.3' },
        action: { index: 0, type: 'log' },
        outcome: 'log',
        message: 'Invalid TLS Version',
        client_ip: '203.0.113.7',
        metadata: { message: 'Invalid TLS Version', edgeId: 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52' },
      });
    });

    it('gives an empty list for an edge without events', async () => {
      const id = await newEdge('tcp');
      const res = await api.call('GET', `/edges/tcp/${id}/traffic_policy/events`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        events: [],
        uri: `${TEST_BASE_URL}/edges/tcp/${id}/traffic_policy/events`,
      });
    });

    it('answers 404 for an unknown edge, or an edge of the other type', async () => {
      const unknown = await api.call(
        'GET',
        '/edges/tls/edgtls_000000000000000000000000000/traffic_policy/events',
      );
      expect(unknown.status).toBe(404);
      expect(unknown.body.msg).toBe('Resource not found');
      const tcp = await newEdge('tcp');
      expect((await api.call('GET', `/edges/tls/${tcp}/traffic_policy/events`)).status).toBe(404);
    });
  });
});

describe('events endpoint without an edge in the process', () => {
  it('lists no events when nothing records them', async () => {
    const api = await createTestApi('sqlite');
    try {
      const id = (await api.call('POST', '/edges/tls', {})).body.id as string;
      const res = await api.call('GET', `/edges/tls/${id}/traffic_policy/events`);
      expect(res.status).toBe(200);
      expect(res.body.events).toEqual([]);
    } finally {
      await api.close();
    }
  });
});
