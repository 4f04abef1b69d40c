/**
 * This node's part of the cluster's online state: every session and tunnel of its own agents is
 * written to the store (src/store/cluster.ts), so other nodes route to them and any API node lists
 * them. A bind claims its name or port in the store before it goes online (TunnelClaims), which
 * is what makes one name have one holder in the whole cluster.
 */
import type { Logger } from '../../core/logger.js';
import type { ClusterRepository, OnlineTunnelRow } from '../../store/index.js';
import type { OptionRules } from '../binds/bind-option-rules.js';
import { mergedPolicyText, type BindTrafficPolicy } from '../binds/bind-traffic-policy.js';
import { optionRulesOf } from '../binds/endpoint-policy.js';
import type { OnlineSession, OnlineTunnel, TunnelRegistry } from '../registry/tunnel-registry.js';
import type { TunnelClaims } from '../sessions/agent-binds.js';
import { sessionRow, tunnelRow } from './online-rows.js';

export interface OnlinePresenceOptions {
  nodeId: string;
  cluster: ClusterRepository;
  registry: TunnelRegistry;
  logger: Logger;
  /** Tell the other nodes the online state changed. */
  changed(): void;
  /** Close a session another node holds (an agent resumed it here). */
  evict(node: string, sessionId: string): void;
  /** Drop stale stand-ins of other nodes' tunnels at a route key the store says is free now. */
  forgetRoute(tunnel: OnlineTunnel): void;
}

/**
 * The text of the policy a tunnel runs: the bind options' rules before the agent's own policy.
 * @example policySourceOf({ text: 'on_http_request: []', policy }, 'https') // 'on_http_request: []'
 */
function policySourceOf(
  policy: { text: string; options?: OptionRules | undefined } | undefined,
  proto: OnlineTunnel['proto'],
): string | undefined {
  if (!policy || !proto) return undefined;
  if (!policy.options) return policy.text;
  return mergedPolicyText(policy.options, policy.text === '' ? undefined : policy.text, proto);
}

/**
 * Follows this node's registry and keeps its rows in the store; writes of one session run in
 * order (a tunnel's row needs its session's), sessions do not wait for each other.
 * @example
 * const presence = new OnlinePresence({ nodeId, cluster, registry, logger, changed, evict, forgetRoute });
 * presence.start(); // and pass it to the agent listener as `claims`
 */
export class OnlinePresence implements TunnelClaims {
  /** Pending writes per session id. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Tunnels of ours with a row, and their session's credential. */
  private readonly claimed = new Map<string, string>();
  /** A write failed (the store was away): the next heartbeat republishes everything. */
  dirty = false;
  /** Writes running now, and started in all: a republish that overlapped one is redone. */
  private inflight = 0;
  private writesStarted = 0;

  constructor(private readonly options: OnlinePresenceOptions) {}

  start(): void {
    const { registry } = this.options;
    registry.on('session-added', this.onSessionAdded);
    registry.on('session-removed', this.onSessionRemoved);
    registry.on('tunnel-removed', this.onTunnelRemoved);
    // Agents that connected before the node started following the registry.
    for (const session of registry.listSessions()) this.onSessionAdded(session);
  }

  close(): void {
    const { registry } = this.options;
    registry.off('session-added', this.onSessionAdded);
    registry.off('session-removed', this.onSessionRemoved);
    registry.off('tunnel-removed', this.onTunnelRemoved);
  }

  /** Every write queued so far, done (tests, and a clean shutdown). */
  async settled(): Promise<void> {
    await Promise.all([...this.chains.values()]);
  }

  async claim(
    tunnel: OnlineTunnel,
    policy: BindTrafficPolicy | undefined,
    takeoverFrom: string | undefined,
  ): Promise<{ sessionId: string } | undefined> {
    const session = this.options.registry.session(tunnel.sessionId);
    const credentialId = session?.credentialId ?? '';
    const row = tunnelRow(
      tunnel,
      this.options.nodeId,
      credentialId,
      policySourceOf(policy, tunnel.proto),
      // The bind attaches `policy` to the tunnel only after this claim: show its text already,
      // as the tunnel will once attached ('' is no policy of the agent's own).
      policy === undefined ? tunnel.trafficPolicy : policy.text === '' ? undefined : policy.text,
    );
    const result = await this.queue(tunnel.sessionId, () =>
      this.options.cluster.claimTunnel(row, { takeoverFrom }),
    );
    if ('holder' in result) return { sessionId: result.holder.sessionId };
    this.claimed.set(tunnel.id, credentialId);
    this.evictResumed(result.replaced, takeoverFrom);
    this.options.forgetRoute(tunnel);
    this.options.changed();
    return undefined;
  }

  release(tunnelId: string): void {
    if (!this.claimed.delete(tunnelId)) return;
    const tunnel = this.options.registry.tunnel(tunnelId);
    void this.write(tunnel?.sessionId ?? '', () => this.options.cluster.deleteTunnel(tunnelId));
  }

  changed(tunnel: OnlineTunnel): void {
    const credentialId = this.claimed.get(tunnel.id);
    if (credentialId === undefined) return;
    const row = this.attachedRow(tunnel, credentialId);
    void this.write(tunnel.sessionId, () => this.options.cluster.updateTunnel(tunnel.id, row.data));
  }

  /**
   * Write every session and tunnel of ours again, at once (after this node was taken for dead
   * while alive, e.g. paused longer than the node timeout). Tunnels whose name another node took
   * meanwhile are closed here: the store decides who holds a name.
   */
  async republish(): Promise<void> {
    const { registry, nodeId, cluster } = this.options;
    this.dirty = false;
    // A write that runs alongside may land between the snapshot below and the store's
    // delete-and-insert, and be wiped: then the next heartbeat republishes again.
    const startedBefore = this.writesStarted;
    const busy = this.inflight > 0;
    const sessions = registry.listSessions().filter((s) => !s.node && s.id !== '');
    const tunnels = registry
      .listTunnels()
      .filter((t) => !t.node && this.claimed.has(t.id))
      .map((t) => this.attachedRow(t, this.claimed.get(t.id) ?? ''));
    const { skipped } = await cluster.republish(
      nodeId,
      sessions.map((s) => sessionRow(s, nodeId)),
      tunnels,
    );
    if (busy || this.inflight > 0 || this.writesStarted !== startedBefore) this.dirty = true;
    for (const id of skipped) {
      this.options.logger.warn(
        { tunnel: id },
        "another node took this tunnel's name while this node was away: closing it here",
      );
      this.claimed.delete(id);
      registry.removeTunnel(id);
    }
    this.options.changed();
  }

  /** The row of a tunnel of ours whose bind attached its policy (its options' rules, its text). */
  private attachedRow(tunnel: OnlineTunnel, credentialId: string): OnlineTunnelRow {
    const policy =
      tunnel.trafficPolicy === undefined
        ? undefined
        : { text: tunnel.trafficPolicy, options: optionRulesOf(tunnel) };
    return tunnelRow(
      tunnel,
      this.options.nodeId,
      credentialId,
      policySourceOf(policy, tunnel.proto),
    );
  }

  private evictResumed(replaced: OnlineTunnelRow[], takeoverFrom: string | undefined): void {
    const evicted = new Set<string>();
    for (const row of replaced) {
      if (row.nodeId === this.options.nodeId || row.sessionId !== takeoverFrom) continue;
      if (evicted.has(row.sessionId)) continue;
      evicted.add(row.sessionId);
      this.options.evict(row.nodeId, row.sessionId);
    }
  }

  private readonly onSessionAdded = (session: OnlineSession): void => {
    if (session.node || session.id === '') return;
    void this.write(session.id, () =>
      this.options.cluster.putSession(sessionRow(session, this.options.nodeId)),
    );
  };

  private readonly onSessionRemoved = (session: OnlineSession): void => {
    if (session.node || session.id === '') return;
    void this.write(session.id, () => this.options.cluster.deleteSession(session.id)).then(() => {
      // The last write of the session: its chain can go once nothing was queued behind it.
      const chain = this.chains.get(session.id);
      void chain?.then(() => {
        if (this.chains.get(session.id) === chain) this.chains.delete(session.id);
      });
    });
  };

  private readonly onTunnelRemoved = (tunnel: OnlineTunnel): void => {
    if (tunnel.node || !this.claimed.delete(tunnel.id)) return;
    void this.write(tunnel.sessionId, () => this.options.cluster.deleteTunnel(tunnel.id));
  };

  /** Queue a write that nobody awaits: failures are logged (the periodic republish heals them). */
  private write(sessionId: string, work: () => Promise<unknown>): Promise<void> {
    return this.queue(sessionId, work).then(
      () => this.options.changed(),
      (err: unknown) => {
        this.dirty = true;
        this.options.logger.warn(
          { err: err instanceof Error ? err.message : String(err), session: sessionId },
          'could not record online state in the store; republishing on the next heartbeat',
        );
      },
    );
  }

  private queue<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const before = this.chains.get(sessionId) ?? Promise.resolve();
    const result = before.then(async () => {
      this.inflight++;
      this.writesStarted++;
      try {
        return await work();
      } finally {
        this.inflight--;
      }
    });
    this.chains.set(
      sessionId,
      result.then(
        () => undefined,
        () => undefined,
      ),
    );
    return result;
  }
}
