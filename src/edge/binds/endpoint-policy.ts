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
 * state waits `retainMs` for its agent, then its events are forgotten; so it is, sooner, when
 * the states kept go past their count or bytes (an agent binding and unbinding in a loop must
 * not fill the heap: docs/security.md, "Budgets").
 */
import { LRUCache } from 'lru-cache';
import {
  estimatedPolicyBytes,
  type CompiledPolicy,
  type EndpointInput,
  type IpPolicyRule,
  type PolicyEventSink,
  type PolicyRunner,
  type SecretsLookup,
} from '../../policy/index.js';
import { CODES } from '../../core/errors.js';
import { DEFAULT_PORTS, parseHostPort } from '../../core/host-port.js';
import { AgentError } from './agent-errors.js';
import type { OptionRules } from './bind-option-rules.js';
import { internalOnline } from '../registry/internal-routing.js';
import type { OnlineTunnel, TunnelPolicy, TunnelRegistry } from '../registry/tunnel-registry.js';

/**
 * The option rules of a tunnel's bind, for PatchTunnelState to keep.
 * @example await policy.checkTrafficPolicy(text, tunnel.proto, 'TrafficPolicy', binder, optionRulesOf(tunnel))
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
  /** How long gone tunnels' policy states wait for their agent, and how many are kept. */
  retention?: Partial<PolicyRetention> | undefined;
  /** Told the counts after every change (the gauges of /metrics). */
  onChange?: ((counts: EndpointPolicyCounts) => void) | undefined;
  /** What live tunnels' policies may weigh, per session and in all (LIVE_POLICY_BUDGET). */
  liveBudget?: LivePolicyBudget | undefined;
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

/** A bind or PatchTunnelState refused: its policy would take the session or process past its budget. */
export class PolicyBudgetError extends AgentError {
  constructor(
    readonly level: 'session' | 'credential' | 'process',
    bytes: number,
    limit: number,
  ) {
    const whose = { session: 'agent session', credential: 'authtoken', process: 'edge' }[level];
    super(
      CODES.agentPolicyBytes,
      `The traffic policy was refused: the policies of this ${whose}'s tunnels would weigh more than ${limit} bytes (estimated; this one ${bytes}). Share one policy between endpoints, make it smaller, or stop some tunnels.`,
    );
  }
}

/** How long gone binds' policy states are kept, how many, and how much they may weigh in all. */
export interface PolicyRetention {
  retainMs: number;
  maxStates: number;
  maxBytes: number;
}

/** The default PolicyRetention. */
export const POLICY_RETENTION: Readonly<PolicyRetention> = {
  /** How long a gone tunnel's policy state waits for its agent to bind again. */
  retainMs: 5 * 60_000,
  /** States kept at once; past it the least recently gone is forgotten. */
  maxStates: 10_000,
  /**
   * Their estimated bytes: each distinct policy they run once (estimatedPolicyBytes), and
   * STATE_BYTES each; past it, the least recently gone is forgotten too.
   */
  maxBytes: 128 * 1024 * 1024,
};

/**
 * What one bind's state weighs besides its policy: the runner, its counters, the owner's events
 * (about 12 KB each with a few events, measured in bench/soak-churn.ts).
 */
const STATE_BYTES = 16 * 1024;

/** Distinct compiled policies and their estimated bytes, each counted once however many use it. */
class DistinctPolicies {
  private readonly uses = new Map<CompiledPolicy, number>();
  bytes = 0;

  has(policy: CompiledPolicy): boolean {
    return this.uses.has(policy);
  }

  get empty(): boolean {
    return this.uses.size === 0;
  }

  /** One more (+1) or one fewer (-1) user of `policy`; returns the change in bytes. */
  count(policy: CompiledPolicy, textLength: number, delta: 1 | -1): number {
    const uses = (this.uses.get(policy) ?? 0) + delta;
    if (uses > 0) this.uses.set(policy, uses);
    else this.uses.delete(policy);
    // The bytes come with the first user of a policy and go with its last.
    const change =
      delta === 1 && uses === 1
        ? estimatedPolicyBytes(textLength)
        : delta === -1 && uses === 0
          ? -estimatedPolicyBytes(textLength)
          : 0;
    this.bytes += change;
    return change;
  }
}

/**
 * What the policies of live tunnels may weigh together (estimatedPolicyBytes of each distinct
 * policy): per agent session, and in all. A session of 1,000 tunnels may otherwise hold 1,000
 * different policies of 128 KiB, some 3 GB compiled.
 */
export const LIVE_POLICY_BUDGET: LivePolicyBudget = {
  perSession: 256 * 1024 * 1024,
  perCredential: 1024 * 1024 * 1024,
  perProcess: 2 * 1024 * 1024 * 1024,
};

export interface LivePolicyBudget {
  perSession: number;
  /** All sessions of one authtoken together. */
  perCredential: number;
  perProcess: number;
}

/** What EndpointPolicies reports, for the gauges of /metrics. */
export interface EndpointPolicyCounts {
  /** Tunnels online with a policy state, and the estimated bytes of their distinct policies. */
  live: number;
  liveBytes: number;
  /** Gone binds' states kept for their agent, and their estimated bytes. */
  retained: number;
  retainedBytes: number;
}

/**
 * Creates, hands over and retires the runners of agent endpoints. The states of gone tunnels wait
 * for their agent in an LRU bounded by count and estimated bytes (POLICY_RETENTION), and the text
 * of a policy many binds share is kept once, with its compiled form (compilePolicy's cache).
 * @example
 * const policies = new EndpointPolicies({ registry, events: policyEventLog });
 * registry.addTunnel(tunnel);
 * policies.attach(tunnel, compiled, credentialId); // before any I/O: the tunnel is not used yet
 */
export class EndpointPolicies {
  private readonly retired: LRUCache<string, EndpointPolicy>;
  /** Live tunnels with a policy state (their EndpointPolicy is on `tunnel.policy`). */
  private live = 0;
  /** One text per compiled policy: binds of the same policy keep one string, not one each. */
  private readonly texts = new WeakMap<CompiledPolicy, string>();
  /** The live tunnels' policies by holder (`session <id>`, `credential <id>`, `process`). */
  private readonly holders = new Map<string, DistinctPolicies>();
  /** The gone binds' states' policies. */
  private readonly kept = new DistinctPolicies();
  private readonly maxRetainedBytes: number;
  private readonly liveBudget: LivePolicyBudget;

  constructor(private readonly options: EndpointPoliciesOptions) {
    const retention = options.retention;
    this.retired = new LRUCache<string, EndpointPolicy>({
      max: retention?.maxStates ?? POLICY_RETENTION.maxStates,
      ttl: retention?.retainMs ?? POLICY_RETENTION.retainMs,
      ttlAutopurge: true,
      // Taken over (delete) or replaced (set: handled by onRemoved): the owner lives on.
      dispose: (policy, _key, reason) => {
        this.kept.count(policy.runner.policy, policy.text.length, -1);
        if (reason === 'evict' || reason === 'expire') this.options.events.forget(policy.ownerId);
        this.changed();
      },
    });
    this.maxRetainedBytes = retention?.maxBytes ?? POLICY_RETENTION.maxBytes;
    this.liveBudget = options.liveBudget ?? LIVE_POLICY_BUDGET;
    options.registry.on('tunnel-removed', this.onRemoved);
  }

  /** Live and kept states now. */
  counts(): EndpointPolicyCounts {
    return {
      live: this.live,
      liveBytes: this.holders.get('process')?.bytes ?? 0,
      retained: this.retired.size,
      retainedBytes: this.retainedBytes(),
    };
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
    if (previous) this.retired.delete(bindKey);
    if (!compiled) {
      if (previous) this.options.events.forget(previous.ownerId);
      tunnel.trafficPolicy = undefined;
      tunnel.policy = undefined;
      return;
    }
    this.install(tunnel, compiled, bindKey, previous);
    this.live++;
    this.use(tunnel.sessionId, credentialId, compiled.policy, compiled.text.length, +1);
    this.changed();
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
    const { sessionId } = tunnel;
    if (current) this.use(sessionId, credentialId, current.runner.policy, current.text.length, -1);
    else this.live++;
    this.use(sessionId, credentialId, compiled.policy, compiled.text.length, +1);
    this.changed();
  }

  /**
   * Refuse (ERR_BURROW_AGENT_POLICY_BYTES) a policy that session `sessionId` of `credentialId`
   * cannot hold on one more tunnel: a policy a holder (the session, its credential, the process)
   * already runs costs it nothing more; another one its estimated bytes, within each holder's
   * budget. Call it just before addTunnel and attach.
   * @example policies.checkRoom(host.id, binder.credentialId, plan.trafficPolicy); registry.addTunnel(tunnel);
   */
  checkRoom(
    sessionId: string,
    credentialId: string,
    compiled: { text: string; policy: CompiledPolicy } | undefined,
  ): void {
    if (!compiled) return;
    const bytes = estimatedPolicyBytes(compiled.text.length);
    const { perSession, perCredential, perProcess } = this.liveBudget;
    for (const [level, key, limit] of [
      ['session', `session ${sessionId}`, perSession],
      ['credential', `credential ${credentialId}`, perCredential],
      ['process', 'process', perProcess],
    ] as const) {
      const held = this.holders.get(key);
      if (held?.has(compiled.policy)) continue;
      if ((held?.bytes ?? 0) + bytes > limit) throw new PolicyBudgetError(level, bytes, limit);
    }
  }

  /** Stop following the registry and drop every retained state. */
  close(): void {
    this.options.registry.off('tunnel-removed', this.onRemoved);
    const owners = [...this.retired.values()].map((policy) => policy.ownerId);
    this.retired.clear();
    for (const owner of owners) this.options.events.forget(owner);
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
    const text = this.sharedText(compiled.policy, compiled.text);
    // A bind with options but no policy of its own shows none (the options' rules hold secrets).
    tunnel.trafficPolicy = text === '' ? undefined : text;
    tunnel.policy = new EndpointPolicy(runner, endpoint, text, bindKey, compiled.options);
  }

  /** The text kept for `policy`: the one already kept when it is the same. */
  private sharedText(policy: CompiledPolicy, text: string): string {
    const kept = this.texts.get(policy);
    if (kept === text) return kept;
    if (kept === undefined) this.texts.set(policy, text);
    return text;
  }

  /** Count one more (or one fewer) live tunnel of a session and credential running `policy`. */
  private use(
    sessionId: string,
    credentialId: string,
    policy: CompiledPolicy,
    textLength: number,
    delta: 1 | -1,
  ): void {
    for (const key of [`session ${sessionId}`, `credential ${credentialId}`, 'process']) {
      let held = this.holders.get(key);
      if (!held) this.holders.set(key, (held = new DistinctPolicies()));
      held.count(policy, textLength, delta);
      if (held.empty) this.holders.delete(key);
    }
  }

  private retainedBytes(): number {
    return this.kept.bytes + this.retired.size * STATE_BYTES;
  }

  private changed(): void {
    this.options.onChange?.(this.counts());
  }

  private readonly onRemoved = (tunnel: OnlineTunnel): void => {
    const policy = tunnel.policy;
    if (!(policy instanceof EndpointPolicy)) return;
    this.live--;
    const credentialId = policy.bindKey.slice(0, policy.bindKey.indexOf('\n'));
    this.use(tunnel.sessionId, credentialId, policy.runner.policy, policy.text.length, -1);
    const earlier = this.retired.peek(policy.bindKey);
    if (earlier && earlier.ownerId !== policy.ownerId) this.options.events.forget(earlier.ownerId);
    this.kept.count(policy.runner.policy, policy.text.length, +1);
    this.retired.set(policy.bindKey, policy);
    // Least recently gone first, until the states fit (this one too, if it alone does not).
    while (this.retainedBytes() > this.maxRetainedBytes && this.retired.size > 0) {
      this.retired.pop();
    }
    this.changed();
  };
}
