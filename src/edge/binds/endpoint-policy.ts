/**
 * Traffic policies of agent endpoints, live: each bind with a policy gets a runner that travels
 * with its tunnel (`tunnel.policy`), which the ingress listeners run on every connection and
 * request.
 *
 * Who owns the runner's state (rate-limit counters) and events: the **bind**, not one tunnel. An
 * agent that reconnects re-binds with the same bind id and gets a new tunnel; that tunnel takes
 * over the previous one's runner (same policy text) or at least its owner id (changed text, so
 * counters start again), so neither a reconnect nor a takeover resets rate limits or loses the
 * events the API shows. The owner id is the id of the first tunnel of the bind; binds are told
 * apart by credential and bind id, so one agent cannot inherit another's state. A gone tunnel's
 * state waits `retainMs` for its agent, then its events are forgotten.
 */
import type {
  CompiledPolicy,
  EndpointInput,
  IpPolicyRule,
  PolicyEventSink,
  PolicyRunner,
  SecretsLookup,
} from '../../policy/index.js';
import { DEFAULT_PORTS, parseHostPort } from '../../core/host-port.js';
import type { OptionRules } from './bind-option-rules.js';
import { internalOnline } from '../registry/internal-routing.js';
import type { OnlineTunnel, TunnelPolicy, TunnelRegistry } from '../registry/tunnel-registry.js';

/**
 * The option rules of a tunnel's bind, for PatchTunnelState to keep.
 * @example await policy.checkTrafficPolicy(text, tunnel.proto, 'TrafficPolicy', optionRulesOf(tunnel))
 */
export function optionRulesOf(tunnel: OnlineTunnel): OptionRules | undefined {
  return tunnel.policy instanceof EndpointPolicy ? tunnel.policy.options : undefined;
}

/** Where runners send events, and how the events of an owner that is gone for good are dropped. */
export interface EndpointPolicyEvents extends PolicyEventSink {
  forget(ownerId: string): void;
}

export interface EndpointPoliciesOptions {
  registry: TunnelRegistry;
  events: EndpointPolicyEvents;
  /** The rules of IP policies (`restrict-ips` `ip_policies`), read when a client arrives. */
  ipPolicyRules?: ((ids: readonly string[]) => Promise<readonly IpPolicyRule[]>) | undefined;
  /** What policies' `secrets.get` reads (the edge's SecretsResolver). */
  secrets?: SecretsLookup | undefined;
  /** How long a gone tunnel's policy state waits for its agent to bind again. Default 5 min. */
  retainMs?: number | undefined;
}

/** A tunnel's policy: the TunnelPolicy the ingress reads, plus what a successor needs. */
export class EndpointPolicy implements TunnelPolicy {
  constructor(
    readonly runner: PolicyRunner,
    readonly endpoint: EndpointInput,
    /** The policy text, to tell whether a successor's policy is the same. */
    readonly text: string,
    /** `<credential id>\n<bind id>`: binds whose tunnels share this state. */
    readonly bindKey: string,
    /** The rules of the bind's options, which a PatchTunnelState policy keeps in front of it. */
    readonly options?: OptionRules | undefined,
  ) {}

  get ownerId(): string {
    return this.runner.ownerId;
  }
}

/**
 * The `endpoint.*` variables of a tunnel: its endpoint id (`ep_` with the tunnel id's characters,
 * as the API shows it), URL, host, port and protocol.
 * @example endpointInputOf(tunnel) // { id: 'ep_…', url: 'https://a.burrow.test:8443', host: 'a.burrow.test', port: 8443, protocol: 'https', … }
 */
export function endpointInputOf(tunnel: OnlineTunnel): EndpointInput {
  const url = tunnel.url ?? '';
  const m = /^([a-z]+):\/\/([^/?#]*)/.exec(url);
  const hp = m ? parseHostPort(m[2]!, { port: 'optional', keepBrackets: true }) : undefined;
  const scheme = m?.[1] ?? tunnel.proto ?? '';
  const host = hp?.host ?? tunnel.hostname ?? '';
  const port = hp?.port ?? tunnel.port ?? DEFAULT_PORTS[scheme] ?? 0;
  return {
    id: `ep_${tunnel.id.slice(tunnel.id.indexOf('_') + 1)}`,
    url,
    host,
    port,
    protocol: tunnel.proto ?? '',
    addr: `${host}:${port}`,
  };
}

interface Retired {
  policy: EndpointPolicy;
  timer: NodeJS.Timeout;
}

/**
 * Creates, hands over and retires the runners of agent endpoints.
 * @example
 * const policies = new EndpointPolicies({ registry, events: policyEventLog });
 * registry.addTunnel(tunnel);
 * policies.attach(tunnel, compiled, credentialId); // before any I/O: the tunnel is not used yet
 */
export class EndpointPolicies {
  private readonly retired = new Map<string, Retired>();
  private readonly retainMs: number;

  constructor(private readonly options: EndpointPoliciesOptions) {
    this.retainMs = options.retainMs ?? 5 * 60_000;
    options.registry.on('tunnel-removed', this.onRemoved);
  }

  /**
   * Give a tunnel that was just registered its bind's policy (or none), taking over the state of
   * the same bind's previous tunnel. Call it in the same tick as addTunnel, which retired that
   * previous tunnel, so that no connection sees the tunnel without its policy.
   */
  attach(
    tunnel: OnlineTunnel,
    compiled:
      { text: string; policy: CompiledPolicy; options?: OptionRules | undefined } | undefined,
    credentialId: string,
  ): void {
    const bindKey = `${credentialId}\n${tunnel.bindId}`;
    const previous = this.retired.get(bindKey);
    if (previous) {
      clearTimeout(previous.timer);
      this.retired.delete(bindKey);
    }
    if (!compiled) {
      if (previous) this.options.events.forget(previous.policy.ownerId);
      tunnel.trafficPolicy = undefined;
      tunnel.policy = undefined;
      return;
    }
    this.install(tunnel, compiled, bindKey, previous?.policy);
  }

  /**
   * Change a live tunnel's policy (PatchTunnelState): the next connection or request runs the new
   * one. Events keep their owner; rate-limit counters start again unless the text is unchanged.
   */
  replace(
    tunnel: OnlineTunnel,
    compiled: { text: string; policy: CompiledPolicy; options?: OptionRules | undefined },
    credentialId: string,
  ): void {
    const current = tunnel.policy instanceof EndpointPolicy ? tunnel.policy : undefined;
    this.install(tunnel, compiled, `${credentialId}\n${tunnel.bindId}`, current);
  }

  /** Stop following the registry and drop every retained state. */
  close(): void {
    this.options.registry.off('tunnel-removed', this.onRemoved);
    for (const { policy, timer } of this.retired.values()) {
      clearTimeout(timer);
      this.options.events.forget(policy.ownerId);
    }
    this.retired.clear();
  }

  private install(
    tunnel: OnlineTunnel,
    compiled: { text: string; policy: CompiledPolicy; options?: OptionRules | undefined },
    bindKey: string,
    previous: EndpointPolicy | undefined,
  ): void {
    const endpoint = endpointInputOf(tunnel);
    const runner =
      previous && previous.text === compiled.text && previous.runner.policy === compiled.policy
        ? previous.runner
        : compiled.policy.bind({
            ownerId: previous?.ownerId ?? tunnel.id,
            events: this.options.events,
            ipPolicyRules: this.options.ipPolicyRules,
            secrets: this.options.secrets,
            internalOnline: (url) => internalOnline(this.options.registry, url),
          });
    // A bind with options but no policy of its own shows none (the options' rules hold secrets).
    tunnel.trafficPolicy = compiled.text === '' ? undefined : compiled.text;
    tunnel.policy = new EndpointPolicy(runner, endpoint, compiled.text, bindKey, compiled.options);
  }

  private readonly onRemoved = (tunnel: OnlineTunnel): void => {
    const policy = tunnel.policy;
    if (!(policy instanceof EndpointPolicy)) return;
    const earlier = this.retired.get(policy.bindKey);
    if (earlier) {
      clearTimeout(earlier.timer);
      if (earlier.policy.ownerId !== policy.ownerId) {
        this.options.events.forget(earlier.policy.ownerId);
      }
    }
    const timer = setTimeout(() => {
      if (this.retired.get(policy.bindKey)?.policy !== policy) return;
      this.retired.delete(policy.bindKey);
      this.options.events.forget(policy.ownerId);
    }, this.retainMs);
    timer.unref();
    this.retired.set(policy.bindKey, { policy, timer });
  };
}
