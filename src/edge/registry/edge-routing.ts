/**
 * Where an edge's connection goes: its backend module names a backend, which is resolved (with
 * failover and weighted members) into a plan when the edge is loaded; each connection then walks
 * the plan over the tunnels online at that moment.
 */
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { BurrowError, CODES } from '../../core/errors.js';
import { formatHostPort, parseHostPort } from '../../core/host-port.js';
import type { Backend } from '../../store/backend-kinds.js';
import { connectTunnel } from './connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo, TunnelRegistry } from './tunnel-registry.js';

/** A backend resolved into what routing needs; members are resolved too. */
export type BackendPlan =
  | { type: 'tunnel_group'; id: string; labels: Record<string, string> }
  | { type: 'failover'; id: string; members: BackendPlan[] }
  | { type: 'weighted'; id: string; members: { plan: BackendPlan; weight: number }[] }
  | { type: 'static'; id: string; host: string; port: number; tls: boolean }
  /** Deleted since, or part of a loop: routes nowhere. */
  | { type: 'missing'; id: string };

/**
 * Resolve backend `id` against `backends` (every backend, by id). Failover and weighted backends
 * carry their members' plans; a member seen twice on one path (a loop) resolves to `missing`.
 * @example planBackend('bkdtg_…', byId) // { type: 'tunnel_group', id, labels: { edge: 'edgtcp_…' } }
 */
export function planBackend(
  id: string,
  backends: ReadonlyMap<string, Backend>,
  path: ReadonlySet<string> = new Set(),
): BackendPlan {
  const backend = backends.get(id);
  if (!backend || path.has(id)) return { type: 'missing', id };
  const inner = new Set(path).add(id);
  switch (backend.type) {
    case 'tunnel_group':
      return { type: 'tunnel_group', id, labels: { ...backend.labels } };
    case 'failover':
      return {
        type: 'failover',
        id,
        members: backend.backends.map((m) => planBackend(m, backends, inner)),
      };
    case 'weighted':
      return {
        type: 'weighted',
        id,
        members: Object.entries(backend.backends).map(([m, weight]) => ({
          plan: planBackend(m, backends, inner),
          weight,
        })),
      };
    case 'static': {
      const hp = parseHostPort(backend.address, { minPort: 1 });
      if (!hp) return { type: 'missing', id };
      return {
        type: 'static',
        id,
        host: hp.host,
        port: hp.port,
        tls: backend.tls.enabled,
      };
    }
  }
  return { type: 'missing', id };
}

/** One place a connection can be sent. */
export type Target =
  | { kind: 'tunnel'; tunnel: OnlineTunnel }
  | { kind: 'static'; backendId: string; host: string; port: number; tls: boolean };

/** Dial attempts per connection before it is given up (a failover chain rarely needs more). */
export const MAX_DIAL_ATTEMPTS = 8;

/**
 * Picks targets for connections: round robin among the online tunnels of a tunnel group (per
 * connection, counted per backend), failover members in order, weighted members at random by
 * weight. `targets()` yields the preferred target first and fallbacks after it, tried when a dial
 * fails.
 * @example for (const target of balancer.targets(plan)) { ... }
 */
export class BackendBalancer {
  private readonly turns = new Map<string, number>();

  constructor(
    private readonly registry: Pick<TunnelRegistry, 'matchingLabels'>,
    private readonly random: () => number = Math.random,
  ) {}

  /** Whether `plan` has somewhere to send a connection now (a static address always does). */
  available(plan: BackendPlan): boolean {
    switch (plan.type) {
      case 'tunnel_group':
        return this.registry.matchingLabels(plan.labels).length > 0;
      case 'failover':
        return plan.members.some((m) => this.available(m));
      case 'weighted':
        return plan.members.some((m) => m.weight > 0 && this.available(m.plan));
      case 'static':
        return true;
      case 'missing':
        return false;
    }
  }

  /** Targets in the order to try; lazily, so unused members' round-robin turns do not move. */
  *targets(plan: BackendPlan): Generator<Target> {
    switch (plan.type) {
      case 'tunnel_group': {
        const tunnels = this.registry.matchingLabels(plan.labels);
        if (tunnels.length === 0) return;
        const turn = this.turns.get(plan.id) ?? 0;
        this.turns.set(plan.id, (turn + 1) % Number.MAX_SAFE_INTEGER);
        const start = turn % tunnels.length;
        for (let i = 0; i < tunnels.length; i++) {
          yield { kind: 'tunnel', tunnel: tunnels[(start + i) % tunnels.length]! };
        }
        return;
      }
      case 'failover':
        // "Moves on only when a backend cannot be dialled": the next member is a fallback only.
        for (const member of plan.members) yield* this.targets(member);
        return;
      case 'weighted': {
        const live = plan.members.filter((m) => m.weight > 0 && this.available(m.plan));
        const total = live.reduce((sum, m) => sum + m.weight, 0);
        if (total === 0) return;
        let point = this.random() * total;
        const chosen = live.find((m) => (point -= m.weight) < 0) ?? live[live.length - 1]!;
        yield* this.targets(chosen.plan);
        for (const m of live) if (m !== chosen) yield* this.targets(m.plan);
        return;
      }
      case 'static':
        yield {
          kind: 'static',
          backendId: plan.id,
          host: plan.host,
          port: plan.port,
          tls: plan.tls,
        };
        return;
      case 'missing':
        return;
    }
  }
}

/**
 * No backend target could take the connection: a 502 with `ERR_NGROK_3004`, the code the
 * ingress's error page and a node link's answer give it. `cause` holds the failure of each target
 * tried (an AggregateError, in order), when there were any; the message names each target and why.
 */
export class NoUpstreamError extends BurrowError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(CODES.tunnelUnreachable, 502, message, {}, options);
  }
}

/** Dial a static backend; resolves once connected (TLS: once the handshake is done). */
function dialStatic(
  target: Extract<Target, { kind: 'static' }>,
  useTls: boolean,
  timeoutMs: number,
): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket: Socket = useTls
      ? tlsConnect({
          host: target.host,
          port: target.port,
          ...(isIP(target.host) ? {} : { servername: target.host }),
          // Like agents' upstream TLS: private services often use self-signed certificates.
          rejectUnauthorized: false,
        })
      : netConnect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `no connection to ${formatHostPort(target.host, target.port)} within ${timeoutMs} ms`,
        ),
      );
    }, timeoutMs);
    socket.once(useTls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      socket.off('error', onError);
      resolve(socket);
    });
    const onError = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.once('error', onError);
  });
}

function describe(target: Target): string {
  return target.kind === 'tunnel' ? target.tunnel.id : formatHostPort(target.host, target.port);
}

/**
 * Open the upstream side of one connection: try `targets` in order until one accepts.
 * `plaintext` says whether the edge hands over plaintext (TCP edges, TLS terminated at the edge):
 * only then does a static backend with `tls.enabled` get a TLS connection; passthrough bytes are
 * already TLS.
 * @example const { stream } = await openUpstream(balancer.targets(plan), info, { plaintext: true, timeoutMs: 10_000 });
 */
export async function openUpstream(
  targets: Iterable<Target>,
  info: ProxyInfo,
  options: { plaintext: boolean; timeoutMs: number },
): Promise<{ stream: Duplex; target: Target }> {
  const attempts: { target: string; error: string }[] = [];
  const failures: unknown[] = [];
  for (const target of targets) {
    if (attempts.length >= MAX_DIAL_ATTEMPTS) break;
    try {
      const stream =
        target.kind === 'tunnel'
          ? await connectTunnel(target.tunnel, info, options.timeoutMs)
          : await dialStatic(target, options.plaintext && target.tls, options.timeoutMs);
      return { stream, target };
    } catch (err) {
      attempts.push({ target: describe(target), error: (err as Error).message });
      failures.push(err);
    }
  }
  if (attempts.length === 0) {
    throw new NoUpstreamError('no tunnel matching the backend is online');
  }
  const message = `every backend target failed: ${attempts.map((a) => `${a.target}: ${a.error}`).join('; ')}`;
  throw new NoUpstreamError(message, { cause: new AggregateError(failures, message) });
}
