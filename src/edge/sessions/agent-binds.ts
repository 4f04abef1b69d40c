import { ID_PREFIX, newId } from '../../core/ids.js';
import type { Bind, BindResp, MuxStream } from '../../protocol/index.js';
import { refusals, type AgentError } from '../binds/agent-errors.js';
import { serveRpc, type RpcServing } from './agent-rpc.js';
import { AgentTunnel, type TunnelHost } from './agent-tunnel.js';
import type { Binder, BindPlan } from '../binds/bind-plan.js';
import type { BindPolicy } from '../binds/bind-policy.js';
import { BIND_LIMITS, checkBindLimits } from '../binds/bind-limits.js';
import { isSet } from '../binds/bind-options.js';
import { legacyPolicyText, type BindTrafficPolicy } from '../binds/bind-traffic-policy.js';
import {
  optionRulesOf,
  PolicyBudgetError,
  type EndpointPolicies,
} from '../binds/endpoint-policy.js';
import type { ResumptionKeys } from '../binds/session-resumption.js';
import {
  holderOf,
  TunnelConflictError,
  type OnlineTunnel,
  type TunnelRegistry,
} from '../registry/tunnel-registry.js';

/** The session as the bind handlers see it. */
export interface BindHost extends TunnelHost {
  readonly id: string;
  /** The authenticated credential; binds are refused before Auth. */
  readonly binder: Binder | undefined;
  /** The stale session this one resumed: its tunnels may be taken over. */
  readonly predecessorId: string | undefined;
  readonly region: string;
  /** Track a tunnel the session now serves; `replaced` is the tunnel it took over, if any. */
  adopt(tunnel: AgentTunnel, replaced: OnlineTunnel | undefined): void;
  /** The session's live tunnel with this bind id (or tunnel id), if any. */
  ownTunnel(id: string): AgentTunnel | undefined;
  /** Tunnels the session serves now. */
  liveTunnelCount(): number;
}

/** Shared by every session of a listener. */
export interface BindServices {
  registry: TunnelRegistry;
  policy: BindPolicy;
  /** Traffic policies of the endpoints binds create. */
  policies: EndpointPolicies;
  keys: ResumptionKeys;
  serving: RpcServing;
  /** Tunnels online at once per session (`--agent-max-tunnels-per-session`). */
  maxTunnelsPerSession?: number | undefined;
  /** Asks the store whether the credential still stands, so no bind succeeds after revocation. */
  revocation?: { refusal(credentialId: string): Promise<AgentError | undefined> } | undefined;
  /** The cluster's record of names and ports (several nodes on one store); absent on one node. */
  claims?: TunnelClaims | undefined;
}

/**
 * Names and ports claimed cluster-wide (src/edge/cluster): a bind claims its name or port in the
 * store before the tunnel goes online, so one name has one holder in the whole cluster.
 */
export interface TunnelClaims {
  /**
   * Record `tunnel` (with the policy it will run, so no other node ever serves it without one).
   * Resolves with the holder's session id when another session serves the name or port.
   */
  claim(
    tunnel: OnlineTunnel,
    policy: BindTrafficPolicy | undefined,
    takeoverFrom: string | undefined,
  ): Promise<{ sessionId: string } | undefined>;
  /** A claimed tunnel that did not go online after all. */
  release(tunnelId: string): void;
  /** A live tunnel's policy or metadata changed (PatchTunnelState). */
  changed(tunnel: OnlineTunnel): void;
}

/**
 * The session's credential, checked against the store (it may have been revoked elsewhere), when
 * the session may hold one more tunnel. (serveRpc held the tunnel's text to AGENT_FIELD_LIMITS.)
 */
async function standingBinder(host: BindHost, s: BindServices): Promise<Binder> {
  const binder = binderOf(host);
  const live = host.liveTunnelCount();
  const max = s.maxTunnelsPerSession ?? BIND_LIMITS.maxTunnelsPerSession;
  if (live >= max) s.serving.refused?.('agent_tunnels_per_session');
  checkBindLimits(live, max);
  const refused = await s.revocation?.refusal(binder.credentialId);
  if (refused) throw refused;
  return binder;
}

/** The session may run one more tunnel of this policy (LIVE_POLICY_BUDGET); refusals counted. */
function checkPolicyRoom(
  host: BindHost,
  s: BindServices,
  binder: Binder,
  policy: BindTrafficPolicy | undefined,
) {
  try {
    s.policies.checkRoom(host.id, binder.credentialId, policy);
  } catch (err) {
    if (err instanceof PolicyBudgetError)
      s.serving.refused?.(`agent_policy_bytes_per_${err.level}`);
    throw err;
  }
}

/** Conflicts with a random name or port are retried with another one this many times. */
const RANDOM_RETRIES = 3;

function binderOf(host: BindHost): Binder {
  if (!host.binder) throw refusals.notAuthenticated();
  return host.binder;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/**
 * The app protocol a bind's ForwardsProto names: `http2` or, for anything else (`""`, `http1`),
 * HTTP/1.1.
 * @example appProtocolOf('http2') // 'http2'
 */
function appProtocolOf(forwardsProto: unknown): 'http2' | undefined {
  return forwardsProto === 'http2' ? 'http2' : undefined;
}

/**
 * Bind (type 1): check and allocate, add the tunnel to the registry (taking over this agent's own
 * stale tunnel atomically), and answer with the URL, the echoed Opts (clients resend them on
 * re-bind) and a token that restores a random name or port on re-bind.
 * @example await serveBind(host, services, stream)
 */
export async function serveBind(host: BindHost, s: BindServices, stream: MuxStream): Promise<void> {
  await serveRpc(
    stream,
    'Bind',
    s.serving,
    async (bind) => {
      const described = {
        metadata: text(bind.Extra?.Metadata),
        forwardsTo: text(bind.ForwardsTo),
        appProtocol: appProtocolOf(bind.ForwardsProto),
      };
      const binder = await standingBinder(host, s);
      const requestedId = text(bind.Id);
      const grant = requestedId
        ? s.keys.verifyBindToken(text(bind.Extra?.Token), requestedId, binder.credentialId)
        : undefined;
      const mayReplace = (holder: OnlineTunnel): boolean =>
        (host.predecessorId !== undefined && holder.sessionId === host.predecessorId) ||
        (holder.sessionId === host.id && holder.bindId === requestedId);
      for (let attempt = 0; ; attempt++) {
        const plan = await s.policy.plan(bind, binder, grant, mayReplace);
        const tunnelId = newId(ID_PREFIX.tunnel);
        const bindId = requestedId || tunnelId;
        const tunnel = new AgentTunnel(
          {
            id: tunnelId,
            sessionId: host.id,
            bindId,
            proto: plan.proto,
            url: plan.url,
            hostname: plan.hostname,
            port: plan.port,
            ...described,
            domainId: plan.domainId,
            addrId: plan.addrId,
            internal: plan.internal,
            pooling: plan.pooling,
            proxyProto: plan.proxyProto,
            hostHeaderRewrite: plan.hostHeaderRewrite,
          },
          host,
        );
        if (host.gone) throw refusals.badRequest('the session closed during the bind');
        const held = await s.claims?.claim(tunnel, plan.trafficPolicy, host.predecessorId);
        if (held) {
          if (plan.random && attempt < RANDOM_RETRIES) continue;
          throw refusals.alreadyOnline(where(plan), `agent session ${held.sessionId}`);
        }
        try {
          if (host.gone) throw refusals.badRequest('the session closed during the bind');
          checkPolicyRoom(host, s, binder, plan.trafficPolicy);
          const replaced = s.registry.addTunnel(tunnel, { takeoverFrom: host.predecessorId });
          // Same tick as addTunnel: no connection can reach the tunnel before its policy is on.
          s.policies.attach(tunnel, plan.trafficPolicy, binder.credentialId);
          host.adopt(tunnel, replaced);
        } catch (err) {
          s.claims?.release(tunnel.id);
          if (!(err instanceof TunnelConflictError)) throw err;
          if (plan.random && attempt < RANDOM_RETRIES) continue;
          throw refusals.alreadyOnline(where(plan), holderOf(err.holder));
        }
        return bindReply(bind, plan, bindId, tunnelId, s.keys, binder);
      }
    },
    (err: AgentError, bind) => ({
      Id: text(bind?.Id),
      URL: '',
      Proto: text(bind?.Proto),
      Opts: bind?.Opts ?? null,
      Error: err.wireText,
      Extra: { Token: '' },
    }),
  );
}

function where(plan: BindPlan): string {
  return plan.internal ?? plan.hostname ?? plan.url;
}

function bindReply(
  bind: Bind,
  plan: BindPlan,
  bindId: string,
  tunnelId: string,
  keys: ResumptionKeys,
  binder: Binder,
): BindResp {
  const token = keys.issueBindToken({
    bindId,
    credentialId: binder.credentialId,
    proto: plan.proto,
    hostname: plan.hostname,
    port: plan.port,
    random: plan.random,
  });
  return {
    Id: bindId,
    URL: plan.url,
    Proto: plan.proto,
    Opts: bind.Opts ?? {},
    Error: '',
    Extra: { Token: token, TunnelID: tunnelId },
  };
}

/** Unbind (type 2): remove one of the session's tunnels; unknown ids are already gone. */
export async function serveUnbind(
  host: BindHost,
  s: BindServices,
  stream: MuxStream,
): Promise<void> {
  await serveRpc(
    stream,
    'Unbind',
    s.serving,
    async (unbind) => {
      binderOf(host);
      // Idempotent: SDKs unbind a listener again when its session closes.
      const tunnel = host.ownTunnel(text(unbind.Id));
      if (tunnel) s.registry.removeTunnel(tunnel.id);
      return { Error: '', Extra: {} };
    },
    (err) => ({ Error: err.wireText }),
  );
}

/**
 * StartTunnelWithLabel (type 7): a tunnel with labels and no address, for edges' tunnel-group
 * backends to route to. Many tunnels may carry the same labels.
 */
export async function serveLabeled(
  host: BindHost,
  s: BindServices,
  stream: MuxStream,
): Promise<void> {
  await serveRpc(
    stream,
    'StartTunnelWithLabel',
    s.serving,
    async (request) => {
      const described = {
        metadata: text(request.Metadata),
        forwardsTo: text(request.ForwardsTo),
        appProtocol: appProtocolOf(request.ForwardsProto),
      };
      const binder = await standingBinder(host, s);
      const labels = s.policy.checkLabels(request.Labels, binder.acl);
      const id = newId(ID_PREFIX.tunnel);
      const tunnel = new AgentTunnel(
        {
          id,
          sessionId: host.id,
          bindId: id,
          proto: undefined,
          url: undefined,
          labels,
          ...described,
        },
        host,
      );
      if (host.gone) throw refusals.badRequest('the session closed during the request');
      await s.claims?.claim(tunnel, undefined, undefined); // labels never conflict
      if (host.gone) {
        s.claims?.release(tunnel.id);
        throw refusals.badRequest('the session closed during the request');
      }
      s.registry.addTunnel(tunnel);
      host.adopt(tunnel, undefined);
      return { Id: id, Error: '' };
    },
    (err) => ({ Id: '', Error: err.wireText }),
  );
}

/**
 * PatchTunnelState (type 10, Go): change a tunnel's metadata, or its traffic policy, which is
 * validated like a bind's and applies from the next connection or request. An empty policy is
 * no change (SDKs send every field): to drop a policy, bind again without one.
 */
export async function servePatchTunnelState(
  host: BindHost,
  s: BindServices,
  stream: MuxStream,
): Promise<void> {
  await serveRpc(
    stream,
    'PatchTunnelState',
    s.serving,
    async (patch) => {
      const binder = binderOf(host);
      const tunnel = host.ownTunnel(text(patch.TunnelId));
      if (!tunnel) throw refusals.unknownTunnel(text(patch.TunnelId));
      // Pooling is decided at bind time (the pool is joined then); a later change applies to
      // the next conflict check only.
      if (typeof patch.PoolingEnabled === 'boolean') tunnel.pooling = patch.PoolingEnabled;
      const given: unknown = patch.TrafficPolicy;
      const policyText = !isSet(given)
        ? ''
        : typeof given === 'string'
          ? given
          : legacyPolicyText(given);
      if (policyText !== '' && !tunnel.proto) {
        throw refusals.badRequest('labeled tunnels take no traffic policy; set it on the edge');
      }
      const compiled =
        policyText !== '' && tunnel.proto
          ? await s.policy.checkTrafficPolicy(
              policyText,
              tunnel.proto,
              'TrafficPolicy',
              binder,
              optionRulesOf(tunnel),
            )
          : undefined;
      if (compiled) {
        checkPolicyRoom(host, s, binder, compiled);
        s.policies.replace(tunnel, compiled, binder.credentialId);
      }
      if (typeof patch.Metadata === 'string') tunnel.metadata = patch.Metadata;
      if (compiled || typeof patch.Metadata === 'string') s.claims?.changed(tunnel);
      return { Error: '' };
    },
    (err) => ({ Error: err.wireText }),
  );
}

/** SrvInfo (type 8, Go's Diagnose): the region. */
export async function serveSrvInfo(
  host: BindHost,
  s: BindServices,
  stream: MuxStream,
): Promise<void> {
  await serveRpc(
    stream,
    'SrvInfo',
    s.serving,
    async () => ({ Region: host.region, Error: '' }),
    (err) => ({ Region: '', Error: err.wireText }),
  );
}
