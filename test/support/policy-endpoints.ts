/**
 * Endpoints with traffic policies in a test ingress's registry, as binds put them there: the
 * policy compiled and bound with `internalOnline` (forward-internal's on_error), public agent or
 * cloud endpoints, and internal endpoints. Shared by the forward-internal tests of each protocol.
 */
import { compilePolicy } from '../../src/policy/index.js';
import { endpointInputOf } from '../../src/edge/binds/endpoint-policy.js';
import { internalOnline } from '../../src/edge/registry/internal-routing.js';
import type { TunnelProto, TunnelRegistry } from '../../src/edge/registry/tunnel-registry.js';
import { fakeTunnel, type FakeTunnel } from './ingress.js';

export interface PolicyEndpoints {
  /** Register `tunnel` with `policy` bound as a bind binds it. */
  add(tunnel: FakeTunnel, policy?: string): FakeTunnel;
  /**
   * A public endpoint on a fresh name under burrow.test: an agent's whose service listens on
   * `upstreamPort`, or a cloud endpoint (nothing behind it).
   */
  publicEndpoint(
    proto: TunnelProto,
    upstreamPort: number,
    policy?: string,
    kind?: 'agent' | 'cloud',
  ): FakeTunnel;
  /** An internal endpoint `name` (`<proto>://name`) whose service listens on `upstreamPort`. */
  internalEndpoint(
    proto: TunnelProto,
    name: string,
    upstreamPort: number,
    policy?: string,
    options?: { pooling?: boolean },
  ): FakeTunnel;
  /** Remove every endpoint added so far (afterEach). */
  removeAll(): void;
}

/**
 * @example
 * const endpoints = policyEndpoints(t.registry);
 * const pub = endpoints.publicEndpoint('http', echo.port, forwardTo('https://api.internal'));
 * afterEach(() => endpoints.removeAll());
 */
export function policyEndpoints(registry: TunnelRegistry): PolicyEndpoints {
  const added: string[] = [];
  let n = 0;
  const add = (tunnel: FakeTunnel, policy?: string): FakeTunnel => {
    if (policy !== undefined) {
      const runner = compilePolicy(policy, { protocol: tunnel.proto ?? 'http' }).bind({
        ownerId: tunnel.id,
        internalOnline: (url) => internalOnline(registry, url),
      });
      tunnel.trafficPolicy = policy;
      tunnel.policy = { ownerId: tunnel.id, runner, endpoint: endpointInputOf(tunnel) };
    }
    registry.addTunnel(tunnel);
    added.push(tunnel.id);
    return tunnel;
  };
  return {
    add,
    publicEndpoint(proto, upstreamPort, policy, kind = 'agent') {
      const tunnel = fakeTunnel({
        proto,
        hostname: `ep${++n}-${proto}.burrow.test`,
        upstreamPort,
        connect:
          kind === 'cloud'
            ? () => Promise.reject(new Error('a cloud endpoint has no agent'))
            : undefined,
      });
      if (kind === 'cloud') tunnel.cloud = true;
      return add(tunnel, policy);
    },
    internalEndpoint(proto, name, upstreamPort, policy, options = {}) {
      const tunnel = fakeTunnel({ proto, upstreamPort });
      tunnel.internal = name;
      tunnel.url = `${proto}://${name}`;
      tunnel.pooling = options.pooling;
      return add(tunnel, policy);
    },
    removeAll() {
      for (const id of added.splice(0)) registry.removeTunnel(id);
    },
  };
}
