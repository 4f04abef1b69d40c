/**
 * What every SSH session of a listener shares (the registry, the bind rules, the endpoints'
 * policies, revocation) and the limits each connection is held to (docs/security.md, "SSH
 * tunnels").
 */
import type { AclRule } from '../../core/acl.js';
import type { Logger } from '../../core/logger.js';
import type { SlidingWindowLimiter } from '../../core/sliding-window.js';
import type { Repositories } from '../../store/index.js';
import type { BindPolicy } from '../binds/bind-policy.js';
import type { EndpointPolicies } from '../binds/endpoint-policy.js';
import type { RefusalLog } from '../listeners/connection-gate.js';
import type { TunnelRegistry } from '../registry/tunnel-registry.js';
import type { TunnelClaims } from '../sessions/agent-binds.js';
import type { RevocationWatch } from '../sessions/revocation.js';
import type { SshSession } from './ssh-session.js';

/** The limits of SSH connections. */
export interface SshLimits {
  /** From the TCP connection to a tunnel command: key exchange, authentication, the command. */
  handshakeTimeoutMs: number;
  /** Authentication requests on one connection (OpenSSH's MaxAuthTries is 6). */
  maxAuthAttempts: number;
  /** Failed authentications (bad signature, unknown or refused key) per address per minute. */
  maxAuthFailuresPerIpPerMinute: number;
  /** `-R` forwards (endpoints) on one connection. */
  maxForwardsPerSession: number;
  /** Public connections open at once through one SSH connection, and waiting for a slot. */
  maxStreamsPerSession: number;
  maxStreamsWaiting: number;
  streamWaitMs: number;
  /** Server keepalives: a client that answers none of `keepaliveCountMax` in a row is dropped. */
  keepaliveIntervalMs: number;
  keepaliveCountMax: number;
  /** Connections at once, in all and per address. */
  maxConnections: number;
  maxConnectionsPerIp: number;
}

export const DEFAULT_SSH_LIMITS: SshLimits = {
  handshakeTimeoutMs: 20_000,
  maxAuthAttempts: 6,
  maxAuthFailuresPerIpPerMinute: 20,
  maxForwardsPerSession: 4,
  maxStreamsPerSession: 256,
  maxStreamsWaiting: 64,
  streamWaitMs: 10_000,
  keepaliveIntervalMs: 15_000,
  keepaliveCountMax: 3,
  maxConnections: 1000,
  maxConnectionsPerIp: 16,
};

/** What the sessions of one SSH listener share. */
export interface SshServices {
  repos: Repositories;
  registry: TunnelRegistry;
  policy: BindPolicy;
  policies: EndpointPolicies;
  revocation: RevocationWatch;
  /** The live sessions, which revocation checks. */
  sessions: Set<SshSession>;
  /** Failed authentications per address (maxAuthFailuresPerIpPerMinute). */
  failures: SlidingWindowLimiter;
  refusals: RefusalLog;
  logger: Logger;
  limits: SshLimits;
  region: string;
  /** The cluster's record of names and ports, as agents' binds claim them; absent on one node. */
  claims?: TunnelClaims | undefined;
  /** A credential's stored ACL as rules, or why it cannot be applied. */
  parseAcl(acl: readonly string[]): AclRule[] | string;
  /** Resolves once the TCP ingress listens on `port` (a tcp forward's URL is told after). */
  tcpListening?: ((port: number) => Promise<void>) | undefined;
}
