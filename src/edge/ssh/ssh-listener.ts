/**
 * The SSH listener (`--ssh-listen`): tunnels with nothing but an SSH client, `ssh -R
 * 0:localhost:3000 -p 2222 burrow.example http`. Its sessions are sessions like agents', their
 * endpoints routes in the same registry (ssh-session.ts, ssh-tunnel.ts); keys are
 * `/ssh_credentials`, checked again every `revocationCheckMs` and at every change made through
 * this process's API (a deleted key or a deactivated owner closes its sessions).
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import { parseAcl } from '../../core/acl.js';
import { formatHostPort, parseHostPort } from '../../core/host-port.js';
import type { Logger } from '../../core/logger.js';
import { SlidingWindowLimiter } from '../../core/sliding-window.js';
import type { Repositories } from '../../store/index.js';
import type { AgentEdgeSettings } from '../binds/agent-edge-settings.js';
import { AgentError } from '../binds/agent-errors.js';
import { BindPolicy } from '../binds/bind-policy.js';
import type { EndpointPolicies } from '../binds/endpoint-policy.js';
import { gateConnections, RefusalLog } from '../listeners/connection-gate.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import type { TunnelRegistry } from '../registry/tunnel-registry.js';
import type { TunnelClaims } from '../sessions/agent-binds.js';
import { RevocationWatch } from '../sessions/revocation.js';
import { loadOrCreateSshHostKey } from './ssh-host-key.js';
import { DEFAULT_SSH_LIMITS, type SshLimits, type SshServices } from './ssh-services.js';
import { SshSession } from './ssh-session.js';

export interface SshListenerOptions {
  /** `host:port` (`--ssh-listen`); port 0 picks a free one. */
  listen: string;
  /** The data folder, where the host key is kept. */
  dataDir: string;
  repos: Repositories;
  registry: TunnelRegistry;
  /** The agent listener's: SSH endpoints' policies count in the same budgets. */
  policies: EndpointPolicies;
  settings: AgentEdgeSettings;
  logger: Logger;
  metrics?: EdgeMetrics | undefined;
  limits?: Partial<SshLimits> | undefined;
  /** The cluster's record of names and ports (several nodes on one store); absent on one node. */
  claims?: TunnelClaims | undefined;
  /** How often the store is asked whether live sessions' keys still stand; 0: only on changes. */
  revocationCheckMs?: number | undefined;
  /** Resolves once the TCP ingress listens on `port`: a tcp forward's URL is told after it. */
  tcpListening?: ((port: number) => Promise<void>) | undefined;
}

/** A running SSH listener. */
export interface SshListener {
  address: string;
  /** The host key's fingerprint, for clients' known_hosts check. */
  hostKeyFingerprint: string;
  revocation: RevocationWatch;
  close(): Promise<void>;
}

/** What an SSH client is told when its key stops standing. */
function sshRefusal(credentialId: string, standing: 'inactive' | undefined): AgentError {
  return standing === 'inactive'
    ? new AgentError(
        undefined,
        `The owner of SSH key ${credentialId} was deactivated; its tunnels are closed.`,
        'ssh_owner_inactive',
      )
    : new AgentError(
        undefined,
        `SSH key ${credentialId} was revoked (its SSH credential was deleted); its tunnels are closed.`,
        'ssh_key_revoked',
      );
}

/**
 * Start the SSH listener.
 * @example const ssh = await startSshListener({ listen: '127.0.0.1:2222', dataDir, repos, registry, policies, settings, logger });
 */
export async function startSshListener(options: SshListenerOptions): Promise<SshListener> {
  const hp = parseHostPort(options.listen);
  if (!hp) throw new Error(`--ssh-listen must be host:port, got '${options.listen}'`);
  const logger = options.logger.child({ component: 'ssh' });
  const limits = { ...DEFAULT_SSH_LIMITS, ...options.limits };
  const hostKey = await loadOrCreateSshHostKey(options.dataDir);
  const sessions = new Set<SshSession>();
  const revocation = new RevocationWatch({
    repos: options.repos,
    sessions: () => sessions,
    logger,
    metrics: options.metrics,
    intervalMs: options.revocationCheckMs ?? 1000,
    credentials: {
      standing: (ids) => options.repos.sshCredentials.standing(ids),
      refusalFor: sshRefusal,
    },
  });
  const refusals = new RefusalLog(logger, options.metrics);
  const services: SshServices = {
    repos: options.repos,
    registry: options.registry,
    policy: new BindPolicy(options.repos, options.registry, options.settings),
    policies: options.policies,
    revocation,
    sessions,
    failures: new SlidingWindowLimiter(limits.maxAuthFailuresPerIpPerMinute, 60_000),
    refusals,
    logger,
    limits,
    region: options.settings.region ?? 'local',
    claims: options.claims,
    tcpListening: options.tcpListening,
    parseAcl: (acl) => {
      const parsed = parseAcl(acl);
      return 'error' in parsed
        ? `The SSH key's ACL cannot be applied (${parsed.error}); fix the SSH credential's acl.`
        : parsed.rules;
    },
  };
  // ssh2 is CommonJS: its named exports come through the default one.
  const server = new ssh2.Server(
    {
      hostKeys: [hostKey.privateKey],
      ident: 'Burrow',
      keepaliveInterval: limits.keepaliveIntervalMs,
      keepaliveCountMax: limits.keepaliveCountMax,
    },
    (client, info) => new SshSession(client, info, services),
  );
  gateConnections(
    server,
    { name: 'ssh', maxTotal: limits.maxConnections, maxPerIp: limits.maxConnectionsPerIp },
    refusals,
  );
  server.listen(hp.port, hp.host);
  await once(server, 'listening');
  revocation.start();
  const port = (server.address() as AddressInfo).port;
  const address = formatHostPort(hp.host, port);
  logger.info({ address, fingerprint: hostKey.fingerprint }, 'SSH listener ready');
  let closing: Promise<void> | undefined;
  return {
    address,
    hostKeyFingerprint: hostKey.fingerprint,
    revocation,
    close() {
      closing ??= (async () => {
        revocation.stop();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const session of sessions) session.end('the edge is shutting down; reconnect');
        await closed;
      })();
      return closing;
    },
  };
}
