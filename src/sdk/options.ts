import { readFileSync } from 'node:fs';
import { arch, hostname, platform } from 'node:os';
import type { Auth } from '../protocol/index.js';
import { parseServerAddr, type ServerAddress } from './dial.js';
import { BurrowAgentError } from './errors.js';
import { resolveTrust, type CaSource, type EdgeTrust } from './trust.js';

/** Options of connect(). Durations are in milliseconds. */
export interface ConnectOptions {
  /** The edge's agent listener, `host:port` (default `127.0.0.1:4443`, the server's default). */
  serverAddr?: string;
  /** An authtoken (POST /credentials). */
  authtoken: string;
  /**
   * CA certificates to trust on top of the system roots: PEM text, PEM bytes, or a file path
   * (`<data-dir>/ca.pem`), or a list of them.
   */
  ca?: CaSource | readonly CaSource[];
  /**
   * Pin the server's CA by its SHA-256 fingerprint (`sha256:AB:CD:…`, as `burrow server` prints
   * it; colons, case and the prefix are optional): the connection is accepted only when the
   * agent listener's chain verifies up to the certificate with this fingerprint, whether or not
   * anything else trusts it. Nothing, the authtoken included, is sent before that check.
   */
  caFingerprint?: string;
  /** The name to verify the server certificate against; default the host of serverAddr. */
  serverName?: string;
  /** Free text about this agent, shown by the API (`/tunnel_sessions`). */
  metadata?: string;
  /** How often to check the connection is alive (default 10 000). */
  heartbeatInterval?: number;
  /** How late an answer may be before the connection is declared dead (default 15 000). */
  heartbeatTolerance?: number;
  /** Reconnect by itself when the connection is lost (default true), with backoff limits. */
  reconnect?: boolean | { initialDelay?: number; maxDelay?: number };
  /**
   * Per-stream flow-control window: `large` (default) offers ALPN `burrow/1` and both ends use
   * 4 MiB, which bulk transfers over real round-trip times need; `standard` is the 256 KiB of
   * the protocol (what third-party agents get).
   */
  window?: 'large' | 'standard';
  /** How long to wait for the TLS connection, and for the local service per connection (default 10 000). */
  connectTimeout?: number;
}

/** connect()'s options, checked and with their defaults. */
export interface SessionSettings {
  address: ServerAddress;
  serverAddr: string;
  authtoken: string;
  trust: EdgeTrust;
  serverName: string | undefined;
  metadata: string;
  heartbeatInterval: number;
  heartbeatTolerance: number;
  reconnect: { initialDelay: number; maxDelay: number } | undefined;
  largeWindow: boolean;
  connectTimeout: number;
}

/** Limit for each RPC (Auth, Bind, Unbind…). */
export const RPC_TIMEOUT_MS = 15_000;
/** A connection that stayed up this long resets the backoff. */
export const STABLE_AFTER_MS = 10_000;

const SDK_VERSION = ((): string => {
  try {
    const pkg = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
})();

/**
 * The delay before reconnect attempt `attempt` (0-based): exponential from `initial` up to
 * `max`, with the upper half jittered so a fleet of agents does not return in lockstep.
 * @example backoffDelay(0, 100, 30_000) // 50..100
 */
export function backoffDelay(
  attempt: number,
  initial: number,
  max: number,
  random = Math.random,
): number {
  const ceiling = Math.min(max, initial * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/**
 * Check connect()'s options and fill in the defaults; throws BurrowAgentError for bad ones.
 * @example resolveConnectOptions({ authtoken: 't' }).serverAddr // '127.0.0.1:4443'
 */
export function resolveConnectOptions(options: ConnectOptions): SessionSettings {
  if (typeof options.authtoken !== 'string' || options.authtoken.trim() === '') {
    throw new BurrowAgentError(
      'an authtoken is required: create one with POST /credentials and pass it as authtoken',
    );
  }
  const serverAddr = options.serverAddr ?? '127.0.0.1:4443';
  const reconnect = options.reconnect ?? true;
  return {
    address: parseServerAddr(serverAddr),
    serverAddr,
    authtoken: options.authtoken.trim(),
    trust: resolveTrust(options.ca, options.caFingerprint),
    serverName: options.serverName,
    metadata: options.metadata ?? '',
    heartbeatInterval: options.heartbeatInterval ?? 10_000,
    heartbeatTolerance: options.heartbeatTolerance ?? 15_000,
    reconnect:
      reconnect === false
        ? undefined
        : {
            initialDelay: (reconnect === true ? undefined : reconnect.initialDelay) ?? 100,
            maxDelay: (reconnect === true ? undefined : reconnect.maxDelay) ?? 30_000,
          },
    largeWindow: (options.window ?? 'large') === 'large',
    connectTimeout: options.connectTimeout ?? 10_000,
  };
}

/**
 * The Auth request: a first connection, or a resumption with the previous session id and cookie.
 * @example authRequest(settings, { clientId: '', cookie: '' })
 */
export function authRequest(
  s: SessionSettings,
  resume: { clientId: string; cookie: string },
): Auth {
  return {
    Version: ['3', '2'],
    ClientId: resume.clientId,
    Extra: {
      OS: platform(),
      Arch: arch(),
      AuthToken: s.authtoken,
      Version: SDK_VERSION,
      Hostname: hostname(),
      UserAgent: `burrow-sdk/${SDK_VERSION} node/${process.versions.node}`,
      Metadata: s.metadata,
      Cookie: resume.cookie,
      HeartbeatInterval: s.heartbeatInterval * 1e6,
      HeartbeatTolerance: s.heartbeatTolerance * 1e6,
      UpdateUnsupportedError: 'the Burrow SDK does not update itself',
      StopUnsupportedError: '',
      RestartUnsupportedError: '',
      ProxyType: '',
      MutualTLS: false,
      ServiceRun: false,
      ConfigVersion: '',
      CustomInterface: false,
      CustomCAs: s.trust.extra.length > 0 || s.trust.pin !== undefined,
      ClientType: 'burrow-sdk',
    },
  };
}
