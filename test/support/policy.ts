import { endpointInputOf } from '../../src/edge/binds/endpoint-policy.js';
import type { OnlineTunnel } from '../../src/edge/registry/tunnel-registry.js';
import {
  compilePolicy,
  type PolicyEventSink,
  type PolicyRunnerOptions,
} from '../../src/policy/index.js';

/**
 * Give a (fake) tunnel a traffic policy the way a bind does, for ingress tests.
 * @example registry.addTunnel(withPolicy(fakeTunnel({ proto: 'http', hostname, upstreamPort }), 'on_http_request: …'));
 */
export function withPolicy<T extends OnlineTunnel>(
  tunnel: T,
  text: string,
  events?: PolicyEventSink,
  ipPolicyRules?: PolicyRunnerOptions['ipPolicyRules'],
): T {
  const runner = compilePolicy(text, { protocol: tunnel.proto ?? 'http' }).bind({
    ownerId: tunnel.id,
    events,
    ipPolicyRules,
  });
  tunnel.trafficPolicy = text;
  tunnel.policy = { ownerId: tunnel.id, runner, endpoint: endpointInputOf(tunnel) };
  return tunnel;
}
