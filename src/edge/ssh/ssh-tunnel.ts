/**
 * An endpoint of an SSH session as the registry holds it: a route like an agent's, whose
 * connect() opens a `forwarded-tcpip` channel to the SSH client, which connects it to the local
 * service its `-R` named. Everything else (policies, inspector, metrics, pooling) is the
 * registry's and the ingress's, unchanged.
 */
import type { Duplex } from 'node:stream';
import type { Connection } from 'ssh2';
import { requestLogLine } from '../../core/request-log-line.js';
import { proxiedAddress } from '../../protocol/proxy-protocol.js';
import type { TrafficRecord } from '../metrics/traffic-log.js';
import type { ProxyInfo, TunnelRegistry } from '../registry/tunnel-registry.js';
import {
  SessionTunnel,
  TunnelUnavailableError,
  type AgentTunnelInit,
  type SessionHost,
} from '../sessions/agent-tunnel.js';

/** The `-R` forward a tunnel serves: what the client asked to bind and the port it was told. */
export interface SshForward {
  /** The bind address the client sent (`localhost`, `''`, or a name: `ssh -R app.example.com:80:…`). */
  bindAddr: string;
  /** The port the client sent, or the one it was told when it sent 0. */
  bindPort: number;
}

/** What a tunnel needs of the SSH session that serves it. */
export interface SshTunnelHost extends SessionHost {
  readonly client: Connection;
  /** Write a line on the client's terminal (the request log). */
  print(line: string): void;
}

/**
 * One endpoint of an SSH session: the route and connect()'s stream slot are SessionTunnel's.
 * @example const stream = await tunnel.connect({ clientAddr: '203.0.113.7:4567', proto: 'https', edgeType: '', passthroughTls: false });
 */
export class SshTunnel extends SessionTunnel<SshTunnelHost> {
  constructor(
    init: Omit<AgentTunnelInit, 'labels' | 'internal' | 'proxyProto'>,
    readonly forward: SshForward,
    host: SshTunnelHost,
  ) {
    super(init, host);
  }

  protected openStream(info: ProxyInfo): Promise<Duplex> {
    // The originator the client sees (OpenSSH logs it); a non-IP address is sent as 0.0.0.0.
    const origin = proxiedAddress(info.clientAddr);
    return new Promise<Duplex>((resolve, reject) => {
      this.host.client.forwardOut(
        this.forward.bindAddr,
        this.forward.bindPort,
        origin?.address ?? '0.0.0.0',
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
  }

  protected sessionName(): string {
    return `SSH session ${this.sessionId}`;
  }
}

/**
 * The request log of SSH tunnels: once a request to one is answered, a line on its client's
 * terminal, as `burrow http` prints it (time, method, path, status, duration). Told by the
 * traffic log of every answered request, on either wire.
 * @example new TrafficLog({ onAnswered: sshRequestLog(registry) })
 */
export function sshRequestLog(
  registry: Pick<TunnelRegistry, 'tunnel'>,
): (record: Pick<TrafficRecord, 'tunnelId' | 'method' | 'path' | 'status' | 'durationMs'>) => void {
  return (record) => {
    const tunnel = registry.tunnel(record.tunnelId);
    if (tunnel instanceof SshTunnel) tunnel.host.print(requestLogLine(record));
  };
}
