import type { TLSSocket } from 'node:tls';
import { readIntoSlabs, SlabLender } from '../../protocol/muxado/slab-reads.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import type { Logger } from '../../core/logger.js';
import {
  BURROW_ALPN,
  ErrorCode,
  MuxError,
  MuxSession,
  type MuxStream,
  StreamType,
  TypedSession,
  echoHeartbeats,
  notify,
  windowForAlpn,
} from '../../protocol/index.js';
import { nowRfc3339 } from '../../store/paging.js';
import type { Repositories } from '../../store/index.js';
import { authenticateAgent, type SessionAuth } from './agent-auth.js';
import {
  serveBind,
  serveLabeled,
  servePatchTunnelState,
  serveSrvInfo,
  serveUnbind,
  type BindHost,
  type BindServices,
} from './agent-binds.js';
import { runCommand } from './agent-commands.js';
import { AgentError, refusals } from '../binds/agent-errors.js';
import { LIVE_POLICY_BUDGET, type LivePolicyBudget } from '../binds/endpoint-policy.js';
import { refuseRpc, serveRpc, type RpcBudgets, type RpcByteLimits } from './agent-rpc.js';
import { StreamLimiter, TunnelUnavailableError, type AgentTunnel } from './agent-tunnel.js';
import type { Binder } from '../binds/bind-plan.js';
import type { RefusalLog } from '../listeners/connection-gate.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import type { OnlineSession, OnlineTunnel } from '../registry/tunnel-registry.js';

/** Timeouts and caps of agent sessions. */
export interface SessionLimits {
  /** The agent must authenticate this soon after the TLS handshake. */
  authTimeoutMs: number;
  /** An RPC request must arrive this soon after its stream opens. */
  rpcTimeoutMs: number;
  /** Restart/Stop must be answered this soon. */
  commandTimeoutMs: number;
  /** A resumed stale session is evicted at the latest this long after the new one authenticated. */
  takeoverGraceMs: number;
  /** Proxied connections open at once per session; more wait (bounded), then fail. */
  maxProxyStreams: number;
  maxQueuedProxyStreams: number;
  proxyStreamWaitMs: number;
  /** Accepted range of the agent's heartbeat interval and tolerance. */
  heartbeatMinMs: number;
  heartbeatMaxMs: number;
  /** Sessions one credential may hold at once; Auth beyond is refused (ERR_NGROK_108). */
  maxSessionsPerCredential: number;
  /** Streams the agent may hold open at once; more are refused with RST StreamRefused. */
  maxStreamsPerSession: number;
  /** Tunnels online at once; a Bind beyond is refused (ERR_NGROK_324). */
  maxTunnelsPerSession: number;
  /** Largest DATA frame accepted; a larger one ends the session (GOAWAY FrameSize). */
  maxFrameBytes: number;
  /** Bytes of one RPC request after Auth (Auth itself is held to MAX_AUTH_BYTES). */
  maxRpcBytes: number;
  /** Bytes all requests being read or served may hold at once: per session, credential, process. */
  rpcBudget: RpcByteLimits;
  /** Estimated bytes of the distinct policies of live tunnels, per session, credential, process. */
  livePolicyBytes: LivePolicyBudget;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  authTimeoutMs: 10_000,
  rpcTimeoutMs: 10_000,
  commandTimeoutMs: 10_000,
  takeoverGraceMs: 10_000,
  maxProxyStreams: 400,
  maxQueuedProxyStreams: 1000,
  proxyStreamWaitMs: 10_000,
  heartbeatMinMs: 100,
  heartbeatMaxMs: 10 * 60_000,
  maxSessionsPerCredential: 100,
  maxStreamsPerSession: 1024,
  maxTunnelsPerSession: 1000,
  maxFrameBytes: 4 * 1024 * 1024,
  maxRpcBytes: 1024 * 1024,
  rpcBudget: {
    perSession: 4 * 1024 * 1024,
    perCredential: 16 * 1024 * 1024,
    perProcess: 128 << 20,
  },
  livePolicyBytes: LIVE_POLICY_BUDGET,
};

/** Heartbeat streams one authenticated session may open (agents open one). */
const MAX_HEARTBEAT_STREAMS = 4;
/** An Auth request is small (a token, versions, metadata); before Auth we read no more than this. */
const MAX_AUTH_BYTES = 64 * 1024;

/** Agent-opened RPC streams after Auth, by stream type. */
const RPC_HANDLERS: Record<number, (h: BindHost, s: BindServices, st: MuxStream) => Promise<void>> =
  {
    [StreamType.Bind]: serveBind,
    [StreamType.Unbind]: serveUnbind,
    [StreamType.StartTunnelWithLabel]: serveLabeled,
    [StreamType.SrvInfo]: serveSrvInfo,
    [StreamType.PatchTunnelState]: servePatchTunnelState,
  };

/** What every session of a listener shares. */
export interface AgentSessionContext extends BindServices {
  repos: Repositories;
  metrics: EdgeMetrics;
  logger: Logger;
  limits: SessionLimits;
  region: string;
  /** Counts each refusal in /metrics and logs it once per client per minute. */
  refusals?: RefusalLog | undefined;
  /** The listener's budgets of bytes held by requests in progress (limits.rpcBudget). */
  rpcBudgets?: RpcBudgets | undefined;
}

/**
 * One connected agent: muxado over the TLS socket, heartbeats echoed from the first byte, Auth,
 * the tunnel RPCs, proxied connections, liveness, and the Restart/Stop commands of the API.
 * Registered in the registry (and so visible to the API and the ingress) once authenticated.
 *
 * @example
 * const session = new AgentSession(tlsSocket, ctx);
 * session.start();
 */
export class AgentSession implements OnlineSession, BindHost {
  readonly id = newId(ID_PREFIX.tunnelSession);
  readonly mux: MuxSession;
  readonly limiter: StreamLimiter;
  readonly ip: string;
  readonly transport: string;
  readonly startedAt = nowRfc3339();
  readonly region: string;
  credentialId = '';
  metadata = '';
  os = '';
  agentVersion = '';
  gone = false;
  predecessorId: string | undefined;

  private auth: SessionAuth | undefined;
  /** Set once the credential is revoked: every later RPC is refused with it. */
  private revoked: AgentError | undefined;
  private authStarted = false;
  private heartbeatStreams = 0;
  private registered = false;
  private readonly tunnels = new Set<AgentTunnel>();
  private readonly logger: Logger;
  private authTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private takeoverTimer: NodeJS.Timeout | undefined;
  /** The listener's services with this session's limits, and refusals counted against its IP. */
  private readonly services: AgentSessionContext;
  /** Count (and log) a refusal for going over `limit` (a metric label) against this client. */
  private readonly refused: (limit: string) => void;

  constructor(
    socket: TLSSocket,
    private readonly ctx: AgentSessionContext,
  ) {
    this.ip = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    this.refused = (limit: string): void => {
      if (ctx.refusals) ctx.refusals.refused(this.ip, limit);
      else ctx.metrics.limitRefusals.with({ limit }).inc();
    };
    // Reads into shared slabs, not a fresh buffer per TLS record, and slabs whose bytes were all
    // relayed are read into again (slab-reads.ts).
    const lender = new SlabLender();
    this.mux = new MuxSession(socket, {
      role: 'server',
      window: windowForAlpn(socket.alpnProtocol),
      // Burrow's SDK turns Nagle off on its side; ngrok-rust agents do not (docs/benchmarks.md).
      ackProbes: socket.alpnProtocol !== BURROW_ALPN,
      // Bulk DATA reaches the relay in pieces as large as its frames (docs/benchmarks.md).
      coalesceReads: true,
      lender,
      maxIncomingStreams: ctx.limits.maxStreamsPerSession,
      maxIncomingFrameSize: ctx.limits.maxFrameBytes,
      onLimit: (limit) =>
        this.refused(limit === 'streams' ? 'agent_streams_per_session' : 'agent_frame_bytes'),
    });
    // Its reads go to the session as ranges of the slabs, without a 'data' event each.
    readIntoSlabs(socket, lender.slabSize, lender, this.mux.slabSink);
    const budget = ctx.rpcBudgets?.session();
    this.services = {
      ...ctx,
      maxTunnelsPerSession: ctx.limits.maxTunnelsPerSession,
      serving: {
        ...ctx.serving,
        maxBytes: ctx.limits.maxRpcBytes,
        refused: this.refused,
        budget: budget && (() => budget.hold(this.auth?.credentialId)),
      },
    };
    this.transport = socket.alpnProtocol === BURROW_ALPN ? BURROW_ALPN : 'ngrok/2';
    this.region = ctx.region;
    const { maxProxyStreams, maxQueuedProxyStreams, proxyStreamWaitMs } = ctx.limits;
    this.limiter = new StreamLimiter(maxProxyStreams, maxQueuedProxyStreams, proxyStreamWaitMs);
    this.logger = ctx.logger.child({ session: this.id });
  }

  get binder(): Binder | undefined {
    // Read by binderOf() inside the RPC handlers: throwing makes the reply the revocation refusal.
    if (this.revoked) throw this.revoked;
    return this.auth && { credentialId: this.auth.credentialId, acl: this.auth.acl };
  }

  /** Start serving: heartbeats at once, Auth within the auth timeout. */
  start(): void {
    const typed = new TypedSession(this.mux, { answerHeartbeats: false });
    typed.on('stream', (stream: MuxStream, type: number) => this.dispatch(stream, type));
    this.mux.once('close', (reason: Error | undefined) => this.onClosed(reason));
    this.authTimer = setTimeout(
      () => this.close('no authentication in time'),
      this.ctx.limits.authTimeoutMs,
    ).unref();
  }

  // ---- OnlineSession -------------------------------------------------------------------------

  stop(): Promise<void> {
    return runCommand(
      this.mux,
      'stop',
      this.auth?.stopUnsupported,
      this.ctx.limits.commandTimeoutMs,
    );
  }

  restart(): Promise<void> {
    return runCommand(
      this.mux,
      'restart',
      this.auth?.restartUnsupported,
      this.ctx.limits.commandTimeoutMs,
    );
  }

  /** Close with GOAWAY (no error): agents reconnect. */
  close(reason: string): void {
    if (this.gone) return;
    this.logger.info({ reason }, 'closing agent session');
    this.mux.goAway(ErrorCode.None, reason);
  }

  /**
   * The credential was revoked: refuse further binds, take every endpoint offline now, and close
   * with GOAWAY carrying the error text (its ERR_NGROK_ code); the transport is torn down a moment
   * later in case the agent keeps its side open.
   */
  revoke(error: AgentError): void {
    if (this.gone || this.revoked) return;
    this.revoked = error;
    for (const t of this.tunnels) if (!t.removed) this.ctx.registry.removeTunnel(t.id);
    this.logger.info({ code: error.code }, 'closing agent session: credential revoked');
    this.mux.goAway(ErrorCode.Internal, error.wireText);
    setTimeout(() => this.mux.destroy(), 1000).unref();
  }

  /** Tell the agent one tunnel is gone (StopTunnel) and remove it. */
  stopTunnel(tunnelId: string, message: string, errorCode?: string): boolean {
    const tunnel = [...this.tunnels].find((t) => t.id === tunnelId && !t.removed);
    if (!tunnel) return false;
    this.ctx.registry.removeTunnel(tunnel.id);
    if (!this.mux.closed) {
      notify(this.mux, StreamType.StopTunnel, {
        Id: tunnel.bindId,
        Message: message,
        ErrorCode: errorCode ?? null,
      });
    }
    return true;
  }

  // ---- BindHost ------------------------------------------------------------------------------

  adopt(tunnel: AgentTunnel, replaced: OnlineTunnel | undefined): void {
    for (const t of this.tunnels) if (t.removed) this.tunnels.delete(t);
    this.tunnels.add(tunnel);
    if (replaced && replaced.sessionId === this.predecessorId) {
      const predecessor = this.ctx.registry.session(this.predecessorId);
      if (predecessor instanceof AgentSession && predecessor.liveTunnelCount() === 0) {
        predecessor.evict(this.id);
      }
    }
  }

  ownTunnel(id: string): AgentTunnel | undefined {
    if (id === '') return undefined;
    for (const t of this.tunnels) {
      if (!t.removed && (t.bindId === id || t.id === id)) return t;
    }
    return undefined;
  }

  liveTunnelCount(): number {
    let n = 0;
    for (const t of this.tunnels) if (!t.removed) n++;
    return n;
  }

  /** Close this stale session because `by` resumed it; tunnels not taken over go offline. */
  evict(by: string): void {
    this.close(`replaced by the resumed session ${by}`);
  }

  // ---- streams -------------------------------------------------------------------------------

  private dispatch(stream: MuxStream, type: number): void {
    if (type === StreamType.Heartbeat) {
      // Agents open one; a few spare for reconnect races, never many (each may hold a window).
      if (++this.heartbeatStreams > (this.auth ? MAX_HEARTBEAT_STREAMS : 1)) {
        stream.reset(ErrorCode.StreamRefused);
        return;
      }
      echoHeartbeats(stream, this.onBeat);
      return;
    }
    if (type === StreamType.Auth) {
      // A second Auth is refused without reading it: before Auth, nothing else may cost us memory.
      if (this.authStarted) refuseRpc(stream, refusals.alreadyAuthenticated(), this.ctx.serving);
      else void this.serveAuth(stream);
      return;
    }
    const handler = RPC_HANDLERS[type];
    if (!handler) {
      this.logger.debug({ type }, 'agent opened a stream of an unexpected type');
      stream.reset(ErrorCode.StreamRefused);
      return;
    }
    if (!this.auth) {
      refuseRpc(stream, refusals.notAuthenticated(), this.ctx.serving);
      return;
    }
    void handler(this, this.services, stream);
  }

  private async serveAuth(stream: MuxStream): Promise<void> {
    this.authStarted = true;
    const result = await serveRpc(
      stream,
      'Auth',
      this.services.serving,
      async (auth) => {
        const ok = await authenticateAgent(auth, this.ctx);
        if (this.gone) throw new AgentError(undefined, 'session closed', 'closed');
        const held = this.ctx.registry.sessionCount(ok.credentialId);
        if (held >= this.ctx.limits.maxSessionsPerCredential) {
          this.refused('agent_sessions_per_credential');
          throw refusals.tooManySessions(this.ctx.limits.maxSessionsPerCredential);
        }
        this.accept(ok, auth.ClientId);
        return {
          Version: '3',
          ClientId: this.id,
          Error: '',
          Extra: {
            Version: 'burrow',
            Region: this.region,
            Cookie: this.ctx.keys.issueCookie({
              sessionId: this.id,
              credentialId: ok.credentialId,
            }),
            AccountName: '',
            SessionDuration: 0,
            PlanName: '',
            Banner: '',
            DeprecationWarning: null,
            ConnectAddresses: [],
            AgentSessionID: this.id,
          },
        };
      },
      (err) => ({ Version: '3', ClientId: '', Error: err.wireText, Extra: {} }),
      MAX_AUTH_BYTES,
    );
    if (!result.ok && !this.auth) {
      // The refusal is in the transport before GOAWAY: writes are ordered.
      if (stream.writableFinished) this.close('authentication failed');
      else stream.once('finish', () => this.close('authentication failed'));
      setTimeout(() => this.close('authentication failed'), 2000).unref();
    }
  }

  private accept(auth: SessionAuth, clientId: string | undefined): void {
    this.auth = auth;
    this.credentialId = auth.credentialId;
    this.metadata = auth.metadata;
    this.os = auth.os;
    this.agentVersion = auth.agentVersion;
    clearTimeout(this.authTimer);
    this.ctx.rpcBudgets?.join(auth.credentialId);
    this.ctx.registry.addSession(this);
    this.registered = true;
    this.armLiveness();
    const resumed =
      clientId && this.ctx.keys.verifyCookie(auth.cookie, clientId, auth.credentialId)
        ? clientId
        : undefined;
    this.logger.info(
      { credential: auth.credentialId, client: auth.clientType, ip: this.ip, resumed },
      'agent session authenticated',
    );
    if (clientId && !resumed) {
      // A cookie of another credential or server, or forged: no takeover, URLs may change.
      this.logger.info({ clientId }, 'resumption cookie not valid: starting afresh');
    }
    if (!resumed) return;
    this.predecessorId = resumed;
    const predecessor = this.ctx.registry.session(resumed);
    if (!(predecessor instanceof AgentSession) || predecessor.gone) return;
    if (predecessor.liveTunnelCount() === 0) {
      predecessor.evict(this.id);
      return;
    }
    this.takeoverTimer = setTimeout(() => {
      if (!predecessor.gone) predecessor.evict(this.id);
    }, this.ctx.limits.takeoverGraceMs).unref();
  }

  // ---- liveness ------------------------------------------------------------------------------

  /** Each chunk of heartbeat nonces: the agent is alive. */
  private readonly onBeat = (): void => this.armLiveness();

  /**
   * (Re)start the liveness deadline; a no-op before Auth, so beats before it arm nothing. The
   * session's one Timeout is re-armed in place (`refresh`): a beat, the only work an idle session
   * does, allocates no timer and no closure (issue 35).
   */
  private armLiveness(): void {
    if (!this.auth || this.gone) return;
    if (this.livenessTimer) {
      this.livenessTimer.refresh();
      return;
    }
    const { heartbeatIntervalMs, heartbeatToleranceMs } = this.auth;
    this.livenessTimer = setTimeout(() => {
      this.logger.warn('agent heartbeats stopped: closing the session');
      this.mux.destroy(new MuxError(ErrorCode.Protocol, 'heartbeat timeout'));
    }, heartbeatIntervalMs + heartbeatToleranceMs).unref();
  }

  private onClosed(reason: Error | undefined): void {
    this.gone = true;
    clearTimeout(this.authTimer);
    clearTimeout(this.livenessTimer);
    clearTimeout(this.takeoverTimer);
    this.limiter.close(new TunnelUnavailableError(`the agent session ${this.id} closed`));
    if (this.registered) this.ctx.registry.removeSession(this.id);
    if (this.auth) this.ctx.rpcBudgets?.leave(this.auth.credentialId);
    if (this.predecessorId) {
      const predecessor = this.ctx.registry.session(this.predecessorId);
      if (predecessor instanceof AgentSession && !predecessor.gone) predecessor.evict(this.id);
    }
    this.logger.info({ reason: reason?.message }, 'agent session ended');
  }
}
