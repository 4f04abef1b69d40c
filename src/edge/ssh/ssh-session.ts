/**
 * One SSH connection to the SSH listener: public-key authentication against `/ssh_credentials`,
 * the `-R` forwards it asks for, and the command (`http`, `tcp`, `tls` and options) that turns
 * them into endpoints, planned and checked like an agent's binds (BindPolicy) and served from
 * the same registry. Everything else an SSH client may ask is refused: shells, other commands,
 * `-L` forwarding, agent and X11 forwarding, subsystems.
 */
import ssh2, {
  type AuthContext,
  type ClientInfo,
  type Connection,
  type ServerChannel,
  type Session,
} from 'ssh2';
import { BurrowError } from '../../core/errors.js';
import { ID_PREFIX, newId } from '../../core/ids.js';
import type { Logger } from '../../core/logger.js';
import { checkSshKeyBlob, SshKeyProblem, type SshPublicKey } from '../../core/ssh-public-key.js';
import { nowRfc3339 } from '../../store/paging.js';
import type { AgentError } from '../binds/agent-errors.js';
import type { Binder } from '../binds/bind-plan.js';
import { StreamLimiter } from '../sessions/agent-tunnel.js';
import type { RevocableSession } from '../sessions/revocation.js';
import type { OnlineSession } from '../registry/tunnel-registry.js';
import { parseSshCommand, SSH_USAGE, type SshCommand } from './ssh-command.js';
import type { SshServices } from './ssh-services.js';
import { bindForward } from './ssh-bind.js';
import type { SshForward, SshTunnel } from './ssh-tunnel.js';

/** A refusal as the client's terminal shows it: the message, then the code. */
function refusalText(err: unknown): string {
  if (err instanceof BurrowError) return `ERROR: ${err.message}${err.code ? ` (${err.code})` : ''}`;
  return `ERROR: ${(err as Error).message}`;
}

/**
 * One SSH connection, from its first byte to its close.
 * @example new SshSession(client, info, services) // the listener makes one per connection
 */
export class SshSession implements RevocableSession {
  readonly id = newId(ID_PREFIX.tunnelSession);
  credentialId = '';
  gone = false;
  readonly limiter: StreamLimiter;
  binder: Binder | undefined;
  /** Why this authenticated client may do nothing (an unknown or revoked key): told, then closed. */
  private refusal: string | undefined;
  private authAttempts = 0;
  private readonly forwards: SshForward[] = [];
  readonly tunnels = new Set<SshTunnel>();
  private channels = 0;
  /** The exec channel: the URL and request log go to it, errors to its stderr. */
  private output: ServerChannel | undefined;
  private timer: NodeJS.Timeout;
  private readonly logger: Logger;

  constructor(
    readonly client: Connection,
    private readonly info: ClientInfo,
    private readonly s: SshServices,
  ) {
    this.logger = s.logger.child({ ssh: this.id, ip: info.ip });
    s.sessions.add(this);
    const l = s.limits;
    this.limiter = new StreamLimiter(l.maxStreamsPerSession, l.maxStreamsWaiting, l.streamWaitMs);
    // Authentication and the command must come within the handshake deadline.
    this.timer = setTimeout(
      () => this.end('timed out before a tunnel command'),
      l.handshakeTimeoutMs,
    );
    this.timer.unref();
    client.on('authentication', (ctx) => void this.authenticate(ctx));
    client.on('ready', () => this.ready());
    client.on('request', (accept, reject, name, request) => {
      if (name === 'tcpip-forward' && 'bindPort' in request) {
        this.forward(request, accept, reject);
      } else if (name === 'cancel-tcpip-forward' && 'bindPort' in request) {
        this.cancelForward(request);
        accept?.();
      } else reject?.();
    });
    client.on('session', (accept, reject) => {
      if (++this.channels > 1) return reject();
      this.serveSession(accept());
    });
    client.on('tcpip', (_accept, reject, request) => {
      this.tell(
        `Local forwarding (-L ${request.destIP}:${request.destPort}) is not available: Burrow serves reverse tunnels (-R) only.`,
      );
      reject();
    });
    client.on('openssh.streamlocal', (_accept, reject) => reject());
    client.on('error', (err) => this.logger.debug({ err: err.message }, 'SSH connection error'));
    client.on('close', () => this.closed());
  }

  get transport(): string {
    return this.info.header.versions.software;
  }

  /** Public keys only; the key must sign, then be an SSH credential whose owner is active. */
  private async authenticate(ctx: AuthContext): Promise<void> {
    if (++this.authAttempts > this.s.limits.maxAuthAttempts) {
      this.s.refusals.refused(this.info.ip, 'ssh_auth_attempts');
      ctx.reject([], false);
      this.end('too many authentication attempts');
      return;
    }
    if (ctx.method !== 'publickey') return ctx.reject(['publickey']);
    let key: SshPublicKey | undefined;
    let problem: string | undefined;
    try {
      key = checkSshKeyBlob(ctx.key.data);
    } catch (err) {
      if (!(err instanceof SshKeyProblem)) throw err;
      problem = err.message;
    }
    // A query (no signature yet): say the key would do, so the client proves it holds it.
    if (!ctx.signature || !ctx.blob) return ctx.accept();
    const parsed = ssh2.utils.parseKey(
      Buffer.from(`${ctx.key.algo} ${ctx.key.data.toString('base64')}`),
    );
    const valid =
      !(parsed instanceof Error) &&
      !Array.isArray(parsed) &&
      parsed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true;
    if (!valid) return this.failed(ctx, 'bad signature');
    try {
      const found = key
        ? await this.s.repos.sshCredentials.authenticate(key.fingerprint)
        : undefined;
      if (!key || !found) {
        this.refusal = problem
          ? `This SSH key cannot be used: ${problem}.`
          : `This SSH key (${key!.fingerprint}) is not an SSH credential of this server. Add its public key with POST /ssh_credentials or \`burrow ssh-key add\` (docs/ssh.md).`;
        this.countFailure();
      } else if (!found.ownerActive) {
        this.refusal = `The owner of this SSH key (${found.credential.owner_id}) is deactivated.`;
        this.countFailure();
      } else {
        const acl = this.s.parseAcl(found.credential.acl);
        if (typeof acl === 'string') this.refusal = acl;
        else this.binder = { credentialId: found.credential.id, acl };
        this.credentialId = found.credential.id;
      }
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'SSH key lookup failed');
      return ctx.reject(['publickey']);
    }
    // Over the address's failures: closed (by countFailure), never let in.
    if (this.gone) return ctx.reject([], false);
    // Accepted even when refused, so the refusal reaches the client's terminal (the SSH
    // protocol has no message for a failed authentication); such a client can bind nothing.
    ctx.accept();
  }

  /** A failed proof of a key: counted against the address, refused. */
  private failed(ctx: AuthContext, why: string): void {
    this.logger.debug({ why }, 'SSH authentication failed');
    this.countFailure();
    ctx.reject(['publickey']);
  }

  private countFailure(): void {
    if (!this.s.failures.take(this.info.ip).allowed) {
      this.s.refusals.refused(this.info.ip, 'ssh_auth_failures_per_ip');
      this.end('too many failed authentications from this address');
    }
  }

  private ready(): void {
    if (this.refusal !== undefined || !this.binder || this.gone) return;
    this.s.registry.addSession(this.onlineSession());
  }

  /** `-R [addr:]port:…`: recorded; the command turns each into an endpoint. */
  private forward(
    request: { bindAddr: string; bindPort: number },
    accept: ((port?: number) => void) | undefined,
    reject: (() => void) | undefined,
  ): void {
    if (this.forwards.length >= this.s.limits.maxForwardsPerSession) {
      this.tell(`At most ${this.s.limits.maxForwardsPerSession} -R forwards per SSH session.`);
      return reject?.();
    }
    // Port 0 must be answered with a port; the client matches channels by it. The public port
    // is the endpoint's, told in its URL.
    const bindPort = request.bindPort === 0 ? 80 : request.bindPort;
    this.forwards.push({ bindAddr: request.bindAddr, bindPort });
    accept?.(bindPort);
  }

  private cancelForward(request: { bindAddr: string; bindPort: number }): void {
    for (const tunnel of this.tunnels) {
      if (
        tunnel.forward.bindAddr === request.bindAddr &&
        tunnel.forward.bindPort === request.bindPort
      ) {
        // Marked removed by the registry's listeners (agent-listener.ts), as every session tunnel.
        this.s.registry.removeTunnel(tunnel.id);
        this.tunnels.delete(tunnel);
      }
    }
  }

  /** The session channel: a tunnel command (exec) and nothing else a client may ask of it. */
  private serveSession(session: Session): void {
    const allow = (accept: (() => void) | undefined): void => accept?.();
    const refuse = (_accept: unknown, reject: (() => void) | undefined): void => reject?.();
    session.on('pty', allow); // `ssh -t`: harmless, nothing reads it
    session.on('env', allow);
    session.on('window-change', allow);
    session.on('signal', allow);
    session.on('auth-agent', refuse); // `-A`: no agent forwarding
    session.on('x11', refuse); // `-X`
    session.on('subsystem', refuse); // sftp and the like
    session.on('sftp', refuse);
    session.on('shell', (accept) => {
      this.output = accept();
      this.tell(
        `ERROR: Burrow has no shell. Give a tunnel command after the host.\r\n${SSH_USAGE}`,
      );
      this.end('shell refused', 1);
    });
    session.on('exec', (accept, reject, request) => {
      if (this.output) return reject?.();
      void this.run(request.command, accept());
    });
  }

  private onlineSession(): OnlineSession {
    return {
      id: this.id,
      credentialId: this.credentialId,
      ip: this.info.ip,
      metadata: '',
      os: '',
      agentVersion: this.transport,
      transport: 'ssh',
      startedAt: nowRfc3339(),
      region: this.s.region,
      stop: async () => this.end('stopped through the API'),
      restart: async () => this.end('restarted through the API: reconnect'),
      close: (reason) => this.end(reason),
    };
  }

  /** Write on the client's stderr, when it has a session channel. */
  tell(line: string): void {
    this.output?.stderr.write(`${line}\r\n`);
  }

  /** Write on the client's stdout (the URL, the request log). */
  print(line: string): void {
    this.output?.write(`${line}\r\n`);
  }

  /** The key was revoked or its owner deactivated: endpoints off now, the client told, closed. */
  revoke(error: AgentError): void {
    if (this.gone) return;
    this.removeTunnels();
    this.tell(refusalText(error));
    this.end('credential revoked', 1);
  }

  /**
   * Close the connection. With a session channel, its exit status and end go first and the
   * connection ends when the client closed the channel (or a second later), so what was written
   * on it reaches the client's terminal.
   */
  end(reason: string, status = 0): void {
    if (this.gone) return;
    this.gone = true;
    this.logger.info({ reason }, 'closing SSH session');
    this.removeTunnels();
    const output = this.output;
    if (!output) {
      this.client.end();
      return;
    }
    output.once('close', () => this.client.end());
    setTimeout(() => this.client.end(), 1000).unref();
    output.exit(status);
    output.end();
  }

  private removeTunnels(): void {
    for (const tunnel of this.tunnels) this.s.registry.removeTunnel(tunnel.id);
    this.tunnels.clear();
  }

  private closed(): void {
    clearTimeout(this.timer);
    this.gone = true;
    this.limiter.close(new Error('the SSH session closed'));
    this.tunnels.clear();
    this.s.registry.removeSession(this.id);
    this.s.sessions.delete(this);
  }

  /** Make the endpoints of every forward for `command`; tell the client each URL. */
  async run(command: string, channel: ServerChannel): Promise<void> {
    this.output = channel;
    if (this.refusal !== undefined) {
      this.tell(`ERROR: ${this.refusal}`);
      return this.end('refused key', 1);
    }
    let parsed: SshCommand;
    try {
      parsed = parseSshCommand(command);
    } catch (err) {
      this.tell(refusalText(err));
      return this.end('bad command', 2);
    }
    if (this.forwards.length === 0) {
      this.tell(`ERROR: no -R forward: add one, e.g. ssh -R 0:localhost:3000 …\r\n${SSH_USAGE}`);
      return this.end('no forward', 2);
    }
    try {
      for (const forward of this.forwards) {
        const tunnel = await bindForward(this, this.s, parsed, forward);
        // A client that connects as soon as it reads the URL must find the port listening.
        if (tunnel.proto === 'tcp' && tunnel.port) await this.s.tcpListening?.(tunnel.port);
        this.print(`Forwarding ${tunnel.url ?? ''}`);
      }
    } catch (err) {
      this.tell(refusalText(err));
      this.logger.info({ err: (err as Error).message }, 'SSH bind refused');
      return this.end('bind refused', 1);
    }
    clearTimeout(this.timer);
  }
}
