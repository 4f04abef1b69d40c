import { endpointInputOf } from '../edge/endpoint-policy.js';
import type { OnlineTunnel } from '../edge/tunnel-registry.js';
import { compilePolicy, type PolicyEventSink } from '../policy/index.js';

/**
 * Give a (fake) tunnel a traffic policy the way a bind does, for ingress tests.
 * @example registry.addTunnel(withPolicy(fakeTunnel({ proto: 'http', hostname, upstreamPort }), 'on_http_request: …'));
 */
export function withPolicy<T extends OnlineTunnel>(
  tunnel: T,
  text: string,
  events?: PolicyEventSink,
): T {
  const runner = compilePolicy(text, { protocol: tunnel.proto ?? 'http' }).bind({
    ownerId: tunnel.id,
    events,
  });
  tunnel.trafficPolicy = text;
  tunnel.policy = { ownerId: tunnel.id, runner, endpoint: endpointInputOf(tunnel) };
  return tunnel;
}
