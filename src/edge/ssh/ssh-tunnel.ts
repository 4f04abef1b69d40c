/**
 * An endpoint of an SSH session as the registry holds it: a route like an agent's, whose
 * connect() opens a `forwarded-tcpip` channel to the SSH client, which connects it to the local
 * service its `-R` named. Everything else (policies, inspector, metrics, pooling) is the
 * registry's and the ingress's, unchanged.
 */
import type { Duplex } from 'node:stream';
import type { Connection } from 'ssh2';
import { parseHostPort } from '../../core/host-port.js';
import { nowRfc3339 } from '../../store/paging.js';
import type {
  OnlineTunnel,
  ProxyInfo,
  TunnelPolicy,
  TunnelProto,
} from '../registry/tunnel-registry.js';
import {
  TunnelUnavailableError,
  type AgentTunnelInit,
  type StreamLimiter,
} from '../sessions/agent-tunnel.js';

/** The `-R` forward a tunnel serves: what the client asked to bind and the port it was told. */
export interface SshForward {
  /** The bind address the client sent (`localhost`, `''`, or a name: `ssh -R app.example.com:80:…`). */
  bindAddr: string;
  /** The port the client sent, or the one it was told when it sent 0. */
  bindPort: number;
}

/** What a tunnel needs of the SSH session that serves it. */
export interface SshTunnelHost {
  readonly client: Connection;
  readonly limiter: StreamLimiter;
  readonly gone: boolean;
  /** Write a line on the client's terminal (the request log). */
  print(line: string): void;
}

/**
 * One endpoint of an SSH session.
 * @example const stream = await tunnel.connect({ clientAddr: '203.0.113.7:4567', proto: 'https', edgeType: '', passthroughTls: false });
 */
export class SshTunnel implements OnlineTunnel {
  readonly id: string;
  readonly sessionId: string;
  readonly bindId: string;
  readonly proto: TunnelProto | undefined;
  readonly url: string | undefined;
  readonly hostname: string | undefined;
  readonly port: number | undefined;
  readonly forwardsTo: string;
  metadata: string;
  trafficPolicy: string | undefined = undefined;
  policy: TunnelPolicy | undefined = undefined;
  readonly startedAt = nowRfc3339();
  readonly domainId: string | undefined;
  readonly addrId: string | undefined;
  readonly pooling: boolean | undefined;
  readonly hostHeaderRewrite: true | undefined;
  removed = false;

  constructor(
    init: Omit<AgentTunnelInit, 'labels' | 'internal' | 'proxyProto'>,
    readonly forward: SshForward,
    readonly host: SshTunnelHost,
  ) {
    this.id = init.id;
    this.sessionId = init.sessionId;
    this.bindId = init.bindId;
    this.proto = init.proto;
    this.url = init.url;
    this.hostname = init.hostname;
    this.port = init.port;
    this.forwardsTo = init.forwardsTo;
    this.metadata = init.metadata;
    this.domainId = init.domainId;
    this.addrId = init.addrId;
    this.pooling = init.pooling;
    this.hostHeaderRewrite = init.hostHeaderRewrite;
  }

  async connect(info: ProxyInfo): Promise<Duplex> {
    this.assertUsable();
    const release = await this.host.limiter.acquire();
    try {
      this.assertUsable();
      // The originator the client sees (OpenSSH logs it); a non-IP address is sent as 0.0.0.0.
      const origin = parseHostPort(info.clientAddr);
      const address = origin?.host.replace(/^\[|\]$/g, '') ?? '0.0.0.0';
      const channel = await new Promise<Duplex>((resolve, reject) => {
        this.host.client.forwardOut(
          this.forward.bindAddr,
          this.forward.bindPort,
          address,
          origin?.port ?? 0,
          (err, stream) => {
            if (err) {
              reject(
                new TunnelUnavailableError(
                  `the SSH client could not open a connection to ${this.forwardsTo}: ${err.message}`,
                ),
              );
            } else resolve(stream);
          },
        );
      });
      channel.once('close', release);
      return channel;
    } catch (err) {
      release();
      throw err;
    }
  }

  private assertUsable(): void {
    if (this.removed) throw new TunnelUnavailableError(`tunnel ${this.id} is offline`);
    if (this.host.gone) {
      throw new TunnelUnavailableError(`the SSH session ${this.sessionId} is gone`);
    }
  }
}

function clock(): string {
  return new Date().toTimeString().slice(0, 8) + '.' + String(Date.now() % 1000).padStart(3, '0');
}

/**
 * The ingress's tap for SSH tunnels: once a request to one is answered, a line on the client's
 * terminal, as `burrow http` prints it (time, method, path, status, duration).
 * @example ingress option `tap: (req, res, tunnel) => { trafficTap(…); sshRequestLog(req, res, tunnel); }`
 */
export function sshRequestLog(
  req: { method?: string | undefined; url?: string | undefined },
  res: NodeJS.EventEmitter & { statusCode: number; headersSent: boolean },
  tunnel: OnlineTunnel,
): void {
  if (!(tunnel instanceof SshTunnel)) return;
  const started = process.hrtime.bigint();
  res.once('close', () => {
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const status = res.headersSent ? String(res.statusCode) : '---';
    const method = (req.method ?? 'GET').padEnd(6);
    tunnel.host.print(`${clock()} ${method} ${req.url ?? '/'} ${status} ${Math.round(ms)}ms`);
  });
}
