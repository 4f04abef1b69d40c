import { describe, expect, it } from 'vitest';
import type { Backend } from '../../store/backend-kinds.js';
import { BackendBalancer, openUpstream, planBackend, type BackendPlan } from './edge-routing.js';
import type { OnlineTunnel } from './tunnel-registry.js';

const common = { description: '', metadata: '', created_at: '2025-01-01T00:00:00Z' };
const byId = (...backends: Backend[]) => new Map(backends.map((b) => [b.id, b]));

function tunnel(id: string, labels: Record<string, string>): OnlineTunnel {
  return {
    id,
    sessionId: `ts_${id}`,
    bindId: id,
    proto: undefined,
    url: undefined,
    labels,
    forwardsTo: '',
    metadata: '',
    startedAt: '',
    connect: () => Promise.reject(new Error(`${id} refuses`)),
  };
}

/** A registry of labeled tunnels, matched by superset like the real one. */
function registryOf(tunnels: OnlineTunnel[]) {
  return {
    matchingLabels: (selector: Record<string, string>) =>
      tunnels.filter((t) => Object.entries(selector).every(([k, v]) => t.labels?.[k] === v)),
  };
}

const names = (balancer: BackendBalancer, plan: BackendPlan) =>
  [...balancer.targets(plan)].map((t) => (t.kind === 'tunnel' ? t.tunnel.id : t.host));

describe('planBackend', () => {
  it('resolves failover and weighted members, and a loop or a deleted member to missing', () => {
    const backends = byId(
      { ...common, id: 'bkdtg_a', type: 'tunnel_group', labels: { app: 'a' } },
      { ...common, id: 'bkdsc_s', type: 'static', address: '[::1]:8080', tls: { enabled: true } },
      { ...common, id: 'bkdwd_w', type: 'weighted', backends: { bkdtg_a: 3, bkdfo_f: 1 } },
      { ...common, id: 'bkdfo_f', type: 'failover', backends: ['bkdsc_s', 'bkdwd_w', 'gone'] },
    );
    expect(planBackend('bkdfo_f', backends)).toEqual({
      type: 'failover',
      id: 'bkdfo_f',
      members: [
        { type: 'static', id: 'bkdsc_s', host: '::1', port: 8080, tls: true },
        {
          type: 'weighted',
          id: 'bkdwd_w',
          members: [
            { plan: { type: 'tunnel_group', id: 'bkdtg_a', labels: { app: 'a' } }, weight: 3 },
            { plan: { type: 'missing', id: 'bkdfo_f' }, weight: 1 },
          ],
        },
        { type: 'missing', id: 'gone' },
      ],
    });
  });
});

describe('BackendBalancer', () => {
  const a1 = tunnel('a1', { app: 'a', zone: '1' });
  const a2 = tunnel('a2', { app: 'a', zone: '2' });
  const b1 = tunnel('b1', { app: 'b' });
  const groupA: BackendPlan = { type: 'tunnel_group', id: 'bkdtg_a', labels: { app: 'a' } };
  const groupB: BackendPlan = { type: 'tunnel_group', id: 'bkdtg_b', labels: { app: 'b' } };
  const groupC: BackendPlan = { type: 'tunnel_group', id: 'bkdtg_c', labels: { app: 'c' } };

  it('rotates the first choice per connection, with the other tunnels as fallbacks', () => {
    const balancer = new BackendBalancer(registryOf([a1, a2, b1]));
    expect(names(balancer, groupA)).toEqual(['a1', 'a2']);
    expect(names(balancer, groupA)).toEqual(['a2', 'a1']);
    expect(names(balancer, groupB)).toEqual(['b1']);
    expect(names(balancer, groupA)).toEqual(['a1', 'a2']);
    expect(names(balancer, { ...groupA, labels: { app: 'a', zone: '2' } })).toEqual(['a2']);
    expect(names(balancer, groupC)).toEqual([]);
    expect(balancer.available(groupC)).toBe(false);
  });

  it('fails over in order and weighs members by their weights, never choosing weight 0', () => {
    let point = 0;
    const balancer = new BackendBalancer(registryOf([a1, b1]), () => point);
    const failover: BackendPlan = { type: 'failover', id: 'f', members: [groupC, groupB, groupA] };
    expect(names(balancer, failover)).toEqual(['b1', 'a1']);
    const weighted: BackendPlan = {
      type: 'weighted',
      id: 'w',
      members: [
        { plan: groupC, weight: 100 },
        { plan: groupA, weight: 1 },
        { plan: groupB, weight: 3 },
      ],
    };
    expect(names(balancer, weighted)).toEqual(['a1', 'b1']);
    point = 0.5;
    expect(names(balancer, weighted)).toEqual(['b1', 'a1']);
    const zero: BackendPlan = { ...weighted, members: [{ plan: groupA, weight: 0 }] };
    expect(names(balancer, zero)).toEqual([]);
    expect(balancer.available(zero)).toBe(false);
  });
});

describe('openUpstream', () => {
  it('tries every target and says why each failed', async () => {
    const balancer = new BackendBalancer(
      registryOf([tunnel('a1', { app: 'a' }), tunnel('a2', { app: 'a' })]),
    );
    const info = {
      clientAddr: '192.0.2.1:1',
      proto: 'tcp',
      edgeType: '1' as const,
      passthroughTls: false,
    };
    const plan: BackendPlan = { type: 'tunnel_group', id: 'x', labels: { app: 'a' } };
    await expect(
      openUpstream(balancer.targets(plan), info, { plaintext: true, timeoutMs: 1000 }),
    ).rejects.toThrow(/every backend target failed: a1: a1 refuses; a2: a2 refuses/);
    await expect(
      openUpstream(balancer.targets({ type: 'missing', id: 'm' }), info, {
        plaintext: true,
        timeoutMs: 1000,
      }),
    ).rejects.toThrow(/no tunnel matching the backend is online/);
  });
});
