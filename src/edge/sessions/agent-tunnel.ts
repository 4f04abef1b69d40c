import type { Duplex } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import { nowRfc3339 } from '../../store/paging.js';
import { type MuxSession, openProxyStream } from '../../protocol/index.js';
import {
  encodeProxyHeader,
  proxiedAddress,
  type ProxiedAddress,
} from '../../protocol/proxy-protocol.js';
import type {
  OnlineTunnel,
  ProxyInfo,
  TunnelPolicy,
  TunnelProto,
} from '../registry/tunnel-registry.js';

/**
 * Why a proxied connection could not be opened (the tunnel went offline, its agent session
 * closed or has too many streams open): a 502 with `ERR_NGROK_3004`, the code the ingress's
 * error page and a node link's answer give it.
 */
export class TunnelUnavailableError extends BurrowError {
  constructor(message: string) {
    super(CODES.tunnelUnreachable, 502, message);
  }
}

/**
 * Caps the proxied streams open at once on one agent session (Rust agents allow 512 concurrent
 * streams, Go queues 128 unaccepted ones). Callers beyond the cap wait in a bounded queue for a
 * bounded time, then fail, so a flood of public connections cannot break the agent's session.
 * @example const release = await limiter.acquire(); stream.once('close', release);
 */
export class StreamLimiter {
  private open = 0;
  private readonly waiting: { grant: () => void; fail: (err: Error) => void }[] = [];
  private failure: Error | undefined;

  constructor(
    readonly max: number,
    private readonly maxWaiting: number,
    private readonly waitMs: number,
  ) {}

  get active(): number {
    return this.open;
  }

  acquire(): Promise<() => void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.open < this.max) return Promise.resolve(this.grant());
    if (this.waiting.length >= this.maxWaiting) {
      return Promise.reject(
        new TunnelUnavailableError(`the agent session has ${this.open} connections open already`),
      );
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(timer);
          resolve(this.grant());
        },
        fail: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(entry), 1);
        reject(new TunnelUnavailableError('timed out waiting for a free agent stream'));
      }, this.waitMs);
      timer.unref();
      this.waiting.push(entry);
    });
  }

  /** Fail every waiter and future caller with `err`. */
  close(err: Error): void {
    this.failure ??= err;
    for (const w of this.waiting.splice(0)) w.fail(err);
  }

  private grant(): () => void {
    this.open++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.open--;
      this.waiting.shift()?.grant();
    };
  }
}

/** What every tunnel needs from the session that serves it. */
export interface SessionHost {
  readonly limiter: StreamLimiter;
  /** True once the session has ended or been evicted. */
  readonly gone: boolean;
}

/** What an agent's tunnel needs from the session that serves it. */
export interface TunnelHost extends SessionHost {
  readonly mux: MuxSession;
}

/** Where and what a new tunnel serves: the registry's view of it, less what binding adds later. */
export type AgentTunnelInit = Omit<
  OnlineTunnel,
  'trafficPolicy' | 'policy' | 'startedAt' | 'connect'
>;

/**
 * The PROXY protocol header (Opts.ProxyProto) of one proxied connection: the public client as
 * source; as destination the address it connected to (`info.serverAddr`), or, when the caller
 * did not say (or it is of the other family), the client's family's unspecified address and the
 * tunnel's public port.
 * @example proxyProtocolHeader(1, { clientAddr: '203.0.113.7:4567', serverAddr: '10.0.0.1:443', ... }, undefined).toString() // 'PROXY TCP4 203.0.113.7 10.0.0.1 4567 443\r\n'
 */
export function proxyProtocolHeader(
  version: 1 | 2,
  info: ProxyInfo,
  port: number | undefined,
): Buffer {
  const source = proxiedAddress(info.clientAddr);
  let destination = proxiedAddress(info.serverAddr);
  if (source && destination?.family !== source.family) {
    const unspecified: ProxiedAddress = {
      address: source.family === 'IPv4' ? '0.0.0.0' : '::',
      port: destination?.port ?? port ?? 0,
      family: source.family,
    };
    destination = unspecified;
  }
  return encodeProxyHeader(version, source, destination);
}

/**
 * A tunnel of a session (an agent's, or an SSH client's: src/edge/ssh/ssh-tunnel.ts): the route
 * the registry holds, and connect()'s part that does not depend on how streams are opened: a
 * slot of the session's StreamLimiter, the tunnel and its session checked before and after the
 * wait for it, the slot given back when the stream closes (or could not be opened).
 */
export abstract class SessionTunnel<
  Host extends SessionHost = SessionHost,
> implements OnlineTunnel {
  readonly id: string;
  readonly sessionId: string;
  readonly bindId: string;
  readonly proto: TunnelProto | undefined;
  readonly url: string | undefined;
  readonly hostname: string | undefined;
  readonly port: number | undefined;
  readonly labels: Record<string, string> | undefined;
  readonly forwardsTo: string;
  metadata: string;
  /** Set by EndpointPolicies.attach / replace, with `policy`, its compiled form. */
  trafficPolicy: string | undefined = undefined;
  policy: TunnelPolicy | undefined = undefined;
  readonly startedAt = nowRfc3339();
  readonly domainId: string | undefined;
  readonly addrId: string | undefined;
  readonly internal: string | undefined;
  /** Changed by PatchTunnelState's PoolingEnabled. */
  pooling: boolean | undefined;
  readonly proxyProto: 1 | 2 | undefined;
  readonly hostHeaderRewrite: true | undefined;
  readonly appProtocol: 'http2' | undefined;
  /** Set when the tunnel is unbound or replaced; connect() then fails at once. */
  removed = false;

  constructor(
    init: AgentTunnelInit,
    readonly host: Host,
  ) {
    this.id = init.id;
    this.sessionId = init.sessionId;
    this.bindId = init.bindId;
    this.proto = init.proto;
    this.url = init.url;
    this.hostname = init.hostname;
    this.port = init.port;
    this.labels = init.labels;
    this.forwardsTo = init.forwardsTo;
    this.metadata = init.metadata;
    this.domainId = init.domainId;
    this.addrId = init.addrId;
    this.internal = init.internal;
    this.pooling = init.pooling;
    this.proxyProto = init.proxyProto;
    this.hostHeaderRewrite = init.hostHeaderRewrite;
    this.appProtocol = init.appProtocol;
  }

  async connect(info: ProxyInfo): Promise<Duplex> {
    this.assertUsable();
    const release = await this.host.limiter.acquire();
    try {
      this.assertUsable();
      const stream = await this.openStream(info);
      stream.once('close', release);
      return stream;
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Open the stream of one proxied connection, a slot of the session's limiter held. */
  protected abstract openStream(info: ProxyInfo): Duplex | Promise<Duplex>;

  /** Whether the session can no longer open streams (besides `host.gone`). */
  protected sessionClosed(): boolean {
    return false;
  }

  /** The session's name in errors: `agent session ts_…`. */
  protected abstract sessionName(): string;

  private assertUsable(): void {
    if (this.removed) throw new TunnelUnavailableError(`tunnel ${this.id} is offline`);
    if (this.host.gone || this.sessionClosed()) {
      throw new TunnelUnavailableError(`the ${this.sessionName()} is gone`);
    }
  }
}

/**
 * A tunnel served by an agent session. connect() opens a proxy stream (type 3) whose SYN frame
 * carries the type, the little-endian length and the ProxyHeader, and hands the stream over;
 * with Opts.ProxyProto the stream's first bytes are a PROXY protocol header, before any of the
 * public connection's, so the agent's service reads it first.
 * @example const stream = await tunnel.connect({ clientAddr: '203.0.113.7:4567', proto: 'https', edgeType: '', passthroughTls: false });
 */
export class AgentTunnel extends SessionTunnel<TunnelHost> {
  protected openStream(info: ProxyInfo): Duplex {
    const stream = openProxyStream(this.host.mux, {
      Id: this.bindId,
      ClientAddr: info.clientAddr,
      Proto: info.proto,
      EdgeType: info.edgeType,
      PassthroughTLS: info.passthroughTls,
    });
    if (this.proxyProto) stream.write(proxyProtocolHeader(this.proxyProto, info, this.port));
    return stream;
  }

  protected override sessionClosed(): boolean {
    return this.host.mux.closed;
  }

  protected sessionName(): string {
    return `agent session ${this.sessionId}`;
  }
}
