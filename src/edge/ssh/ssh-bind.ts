/**
 * One `-R` forward of an SSH session made into an endpoint by its command: planned by the bind
 * rules agents' binds go through (BindPolicy: the key's ACL, reserved names and addresses), with
 * the command's options as the endpoint's traffic policy, claimed in the cluster, added to the
 * registry with its policy attached in the same tick.
 */
import { ID_PREFIX, newId } from '../../core/ids.js';
import { endpointTrafficPolicy } from '../../policy/endpoint-flags.js';
import type { Bind } from '../../protocol/index.js';
import { refusals } from '../binds/agent-errors.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';
import type { SshCommand } from './ssh-command.js';
import type { SshServices } from './ssh-services.js';
import type { SshSession } from './ssh-session.js';
import { SshTunnel, type SshForward } from './ssh-tunnel.js';

/** Bind addresses that name nothing: the endpoint gets a random name (or port). */
const NO_NAME = new Set(['', 'localhost', '0.0.0.0', '::', '*', '127.0.0.1', '::1']);

/**
 * Make the endpoint of `forward` for `command`; throws the refusal (an AgentError, or the
 * option's ValidationError) for the client's terminal.
 * @example const tunnel = await bindForward(session, services, parseSshCommand('http'), { bindAddr: 'localhost', bindPort: 80 });
 */
export async function bindForward(
  session: SshSession,
  s: SshServices,
  command: SshCommand,
  forward: SshForward,
): Promise<OnlineTunnel> {
  const binder = session.binder!;
  const refused = await s.revocation.refusal(binder.credentialId);
  if (refused) throw refused;
  const policyText = endpointTrafficPolicy(
    command.flags,
    command.proto,
    command.trafficPolicy === undefined
      ? undefined
      : { field: '--traffic-policy', text: command.trafficPolicy },
    'the options with --traffic-policy',
  );
  const named = NO_NAME.has(forward.bindAddr.toLowerCase()) ? undefined : forward.bindAddr;
  const where =
    command.url ??
    (named === undefined
      ? undefined
      : command.proto === 'tcp'
        ? `${named}:${forward.bindPort}`
        : named);
  const bind: Bind = {
    Proto: command.proto === 'http' ? 'https' : command.proto,
    Opts: {
      ...(where === undefined ? {} : command.proto === 'tcp' ? { Addr: where } : { URL: where }),
      ...(policyText === undefined ? {} : { TrafficPolicy: policyText }),
      ...(command.flags.hostHeader === undefined ? {} : { HostHeaderRewrite: true }),
    },
    Extra: { PoolingEnabled: command.pooling },
  };
  const mine = (holder: OnlineTunnel): boolean => holder.sessionId === session.id;
  const plan = await s.policy.plan(bind, binder, undefined, mine);
  const id = newId(ID_PREFIX.tunnel);
  const tunnel = new SshTunnel(
    {
      id,
      sessionId: session.id,
      bindId: id,
      proto: plan.proto,
      url: plan.url,
      hostname: plan.hostname,
      port: plan.port,
      forwardsTo: `ssh -R ${forward.bindAddr}:${forward.bindPort}`,
      // Not the command's text: its options may hold passwords and secrets.
      metadata: `ssh ${command.proto}`,
      domainId: plan.domainId,
      addrId: plan.addrId,
      pooling: plan.pooling,
      hostHeaderRewrite: plan.hostHeaderRewrite,
    },
    forward,
    session,
  );
  if (session.gone) throw new Error('the SSH session closed during the bind');
  // In a cluster the name or port is claimed in the store first, as an agent's bind does.
  const held = await s.claims?.claim(tunnel, plan.trafficPolicy, undefined);
  if (held)
    throw refusals.alreadyOnline(plan.hostname ?? plan.url, `agent session ${held.sessionId}`);
  try {
    if (session.gone) throw new Error('the SSH session closed during the bind');
    s.policies.checkRoom(session.id, binder.credentialId, plan.trafficPolicy);
    s.registry.addTunnel(tunnel);
    // Same tick as addTunnel: no connection reaches the tunnel before its policy is on.
    s.policies.attach(tunnel, plan.trafficPolicy, binder.credentialId);
  } catch (err) {
    s.claims?.release(tunnel.id);
    throw err;
  }
  session.tunnels.add(tunnel);
  return tunnel;
}
