import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EndpointPolicies } from '../edge/binds/endpoint-policy.js';
import { TunnelRegistry } from '../edge/registry/tunnel-registry.js';
import { compilePolicy, PolicyEventLog } from '../policy/index.js';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { fakeTunnel } from '../../test/support/ingress.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';

const DENY_ALL = 'on_tcp_connect: [{name: nobody, actions: [{type: deny}]}]';

describe.each(DATABASE_KINDS)('traffic policy events of endpoints (%s)', (kind) => {
  let api: TestApi;
  const registry = new TunnelRegistry();
  const events = new PolicyEventLog();
  const policies = new EndpointPolicies({ registry, events });

  beforeAll(async () => {
    api = await createTestApi(kind, {
      online: { tunnelsMatching: () => [], policyEvents: events, registry },
    });
  });
  afterAll(async () => {
    policies.close();
    await api.close();
  });

  /** An online tcp tunnel of bind `bindId` whose policy denied one client. */
  async function deniedOnce(bindId: string) {
    const tunnel = { ...fakeTunnel({ proto: 'tcp', port: 20100 }), bindId };
    registry.addTunnel(tunnel);
    policies.attach(
      tunnel,
      { text: DENY_ALL, policy: compilePolicy(DENY_ALL, { protocol: 'tcp' }) },
      'cr_1',
    );
    await tunnel.policy!.runner.onTcpConnect({ conn: { client_ip: '203.0.113.9' } });
    return tunnel;
  }

  it('serves them by tunnel id and by endpoint id, newest first', async () => {
    const tunnel = await deniedOnce('b1');
    const endpointId = `ep_${tunnel.id.slice(3)}`;
    for (const path of [`/tunnels/${tunnel.id}`, `/endpoints/${endpointId}`]) {
      const res = await api.call('GET', `${path}/traffic_policy/events`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        uri: `${TEST_BASE_URL}${path}/traffic_policy/events`,
        events: [
          {
            owner_id: tunnel.id,
            phase: 'on_tcp_connect',
            rule: { index: 0, name: 'nobody' },
            action: { index: 0, type: 'deny' },
            outcome: 'denied',
            client_ip: '203.0.113.9',
          },
        ],
      });
    }
    registry.removeTunnel(tunnel.id);
  });

  it('keeps a bind’s events across its tunnels, and 404s for what is not online', async () => {
    const first = await deniedOnce('b2');
    registry.removeTunnel(first.id);
    expect((await api.call('GET', `/tunnels/${first.id}/traffic_policy/events`)).status).toBe(404);
    const second = await deniedOnce('b2');
    const res = await api.call('GET', `/tunnels/${second.id}/traffic_policy/events`);
    expect(res.body.events.map((e: { owner_id: string }) => e.owner_id)).toEqual([
      first.id,
      first.id,
    ]);
    expect((await api.call('GET', '/endpoints/ep_nope/traffic_policy/events')).status).toBe(404);
    expect((await api.call('GET', '/tunnels/tn_nope/traffic_policy/events')).status).toBe(404);

    const bare = fakeTunnel({ proto: 'http', hostname: 'bare.burrow.test' });
    registry.addTunnel(bare);
    const none = await api.call('GET', `/endpoints/ep_${bare.id.slice(3)}/traffic_policy/events`);
    expect(none.body.events).toEqual([]);
    registry.removeTunnel(second.id);
    registry.removeTunnel(bare.id);
  });
});
