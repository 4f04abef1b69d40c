/**
 * Why an agent could not connect to the edge, and what to do about it: the one place that maps
 * Node's TLS and socket error codes (and the server's authtoken refusals) to a message of one or
 * two lines. The first line says what happened, the second what to do, in the words of whoever
 * reads it: SDK option names for programs, flags for the `burrow` commands (`hints`).
 */
import { hostOfHostPort } from '../core/host-port.js';
import { BurrowAgentError } from './errors.js';

/** What went wrong, roughly: each kind has its own advice. */
export type ConnectFailureKind =
  | 'untrusted'
  | 'name-mismatch'
  | 'not-yet-valid'
  | 'expired'
  | 'pin-mismatch'
  | 'refused'
  | 'unresolved'
  | 'unreachable'
  | 'timeout'
  | 'not-tls'
  | 'other';

/** A certificate the server presented, as the messages show it. */
export interface PresentedCertificate {
  /** The subject's CN (or the whole subject when it has none). */
  name: string;
  /** `sha256:AB:CD:…`. */
  fingerprint: string;
  /** The names a leaf holds (DNS names and IP addresses). */
  altNames: string[];
  validFrom: Date;
  validTo: Date;
}

/** Everything a message about a failed connection needs. */
export interface ConnectFailure {
  kind: ConnectFailureKind;
  /** The `host:port` that was dialled. */
  address: string;
  /** The name the certificate was checked against. */
  serverName: string;
  /** Node's code (`SELF_SIGNED_CERT_IN_CHAIN`, `ECONNREFUSED`…) when there was one. */
  code: string | undefined;
  /** Node's own words, kept in the message for searching. */
  detail: string;
  /** The chain the server presented, leaf first, when the handshake got that far. */
  chain: PresentedCertificate[];
  /** The pinned fingerprint (`sha256:…`) for `pin-mismatch`. */
  pin?: string;
  /** Limit of the connection attempt, for `timeout`. */
  timeoutMs?: number;
}

const KIND_OF_CODE: Record<string, ConnectFailureKind> = {
  SELF_SIGNED_CERT_IN_CHAIN: 'untrusted',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'untrusted',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'untrusted',
  UNABLE_TO_GET_ISSUER_CERT: 'untrusted',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'untrusted',
  CERT_UNTRUSTED: 'untrusted',
  CERT_REJECTED: 'untrusted',
  CERT_SIGNATURE_FAILURE: 'untrusted',
  INVALID_CA: 'untrusted',
  PATH_LENGTH_EXCEEDED: 'untrusted',
  INVALID_PURPOSE: 'untrusted',
  ERR_TLS_CERT_ALTNAME_INVALID: 'name-mismatch',
  HOSTNAME_MISMATCH: 'name-mismatch',
  CERT_NOT_YET_VALID: 'not-yet-valid',
  CERT_HAS_EXPIRED: 'expired',
  ECONNREFUSED: 'refused',
  ENOTFOUND: 'unresolved',
  EAI_AGAIN: 'unresolved',
  EAI_NONAME: 'unresolved',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  EHOSTDOWN: 'unreachable',
  ETIMEDOUT: 'unreachable',
  EADDRNOTAVAIL: 'unreachable',
  ECONNRESET: 'not-tls',
  EPIPE: 'not-tls',
  EPROTO: 'not-tls',
  ERR_SSL_WRONG_VERSION_NUMBER: 'not-tls',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'not-tls',
  ERR_SSL_UNSUPPORTED_PROTOCOL: 'not-tls',
  ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: 'not-tls',
  ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: 'not-tls',
};

/**
 * The kind of failure a Node error code stands for (`other` for codes it does not know).
 * @example connectFailureKind('SELF_SIGNED_CERT_IN_CHAIN') // 'untrusted'
 */
export function connectFailureKind(code: string | undefined): ConnectFailureKind {
  return (code !== undefined && KIND_OF_CODE[code]) || 'other';
}

/** How the reader names the settings the advice mentions. */
export interface ConnectHints {
  /** Give a CA file. */
  ca: string;
  /** Pin a fingerprint. */
  caFingerprint: string;
  /** Store a CA for good, when the reader has a way to. */
  addCa: string | undefined;
  /** Choose the server address. */
  server: string;
  /** Give an authtoken. */
  authtoken: string;
}

/** Advice in the SDK's words (connect() options). */
export const SDK_HINTS: ConnectHints = {
  ca: "the `ca` option (the server's <data-dir>/ca.pem)",
  caFingerprint: 'the `caFingerprint` option',
  addCa: undefined,
  server: 'the `serverAddr` option',
  authtoken: 'the `authtoken` option',
};

/** Advice in the words of `burrow http|tcp|tls` and `burrow agent`. */
export const CLI_HINTS: ConnectHints = {
  ca: "--ca <file> (the server's <data-dir>/ca.pem)",
  caFingerprint: '--ca-fingerprint <sha256>',
  addCa: '`burrow config add-ca <file|url>`',
  server: '--server <host:port>',
  authtoken: '--authtoken (or BURROW_AUTHTOKEN, or `burrow config add-authtoken <token>`)',
};

function quoted(names: readonly string[]): string {
  return names.length === 0 ? 'no name at all' : names.join(', ');
}

function iso(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The chain as `"name" sha256:…`, top (the CA) first: what people compare with the server's. */
function chainText(chain: readonly PresentedCertificate[]): string {
  return [...chain]
    .reverse()
    .map((c) => `"${c.name}" ${c.fingerprint}`)
    .join(', ');
}

function whatHappened(f: ConnectFailure, hints: ConnectHints, now: Date): string {
  const leaf = f.chain[0];
  const top = f.chain[f.chain.length - 1];
  switch (f.kind) {
    case 'untrusted':
      return (
        `its certificate is not trusted here (${f.detail})` +
        (top ? `: it comes from "${top.name}" ${top.fingerprint}` : '')
      );
    case 'name-mismatch':
      return `its certificate is for ${quoted(leaf?.altNames ?? [])}, not for ${f.serverName}`;
    case 'not-yet-valid': {
      const early = f.chain.find((c) => c.validFrom > now) ?? leaf;
      return `its certificate "${early?.name ?? '?'}" is valid only from ${early ? iso(early.validFrom) : '?'}, and this machine's clock says ${iso(now)}`;
    }
    case 'expired': {
      const late = f.chain.find((c) => c.validTo < now) ?? leaf;
      return `its certificate "${late?.name ?? '?'}" expired at ${late ? iso(late.validTo) : '?'}, and this machine's clock says ${iso(now)}`;
    }
    case 'pin-mismatch':
      return `no certificate it presents has the fingerprint of ${hints.caFingerprint} (${f.pin ?? '?'}); it presents ${chainText(f.chain) || 'none'}. Nothing was sent to it`;
    case 'refused':
      return 'the connection was refused: nothing listens there';
    case 'unresolved':
      return `the host ${hostOfHostPort(f.address)} is not known (${f.code ?? f.detail})`;
    case 'unreachable':
      return `the network cannot reach it (${f.code ?? f.detail})`;
    case 'timeout':
      return `no TLS connection within ${f.timeoutMs ?? '?'} ms`;
    case 'not-tls':
      return `the TLS handshake failed (${f.detail}): it does not look like a Burrow agent listener`;
    case 'other':
      return f.detail;
  }
}

function whatToDo(f: ConnectFailure, hints: ConnectHints): string | undefined {
  const addCa = hints.addCa ? `, or store it once with ${hints.addCa}` : '';
  switch (f.kind) {
    case 'untrusted':
      return (
        `Trust the server's CA with ${hints.ca}${addCa}, or pin it with ${hints.caFingerprint} ` +
        '(the fingerprint `burrow server` prints at start; compare it with the one above).'
      );
    case 'name-mismatch':
      return (
        `Connect to one of those names (${hints.server}), or give the server a certificate for ` +
        `${f.serverName}: run it with --agent-listen ${f.serverName}:<port>, or put one in <data-dir>/certs/.`
      );
    case 'not-yet-valid':
    case 'expired':
      return (
        'Check the clock of this machine and of the server (e.g. `timedatectl`; enable NTP). If both ' +
        'are right, the server must renew it: restart it (local-CA certificates), or replace the file in <data-dir>/certs/.'
      );
    case 'pin-mismatch':
      return (
        `Compare ${hints.caFingerprint} with what \`burrow server\` printed at start (or ` +
        '`openssl x509 -in ca.pem -noout -fingerprint -sha256` on the server): a different one means ' +
        'another server, a new CA, or someone in between.'
      );
    case 'refused':
      return (
        `Is \`burrow server\` running there? Agents connect to its --agent-listen address ` +
        `(default 127.0.0.1:4443); give it with ${hints.server}.`
      );
    case 'unresolved':
      return `Check the host name in ${hints.server}.`;
    case 'unreachable':
    case 'timeout':
      return `Check ${hints.server}, the network and firewalls between here and the server (the agent listener's port, default 4443).`;
    case 'not-tls':
      return `Give ${hints.server} the server's --agent-listen address (default port 4443), not the API (4000) or a public port.`;
    case 'other':
      return undefined;
  }
}

/**
 * The message for a failed connection: `failed to connect to <address>: <what happened>`, then
 * on a second line what to do, in the words of `hints`.
 * @example describeConnectFailure(failure, CLI_HINTS) // 'failed to connect to 127.0.0.1:4443: the connection was refused…\nIs `burrow server` running there?…'
 */
export function describeConnectFailure(
  f: ConnectFailure,
  hints: ConnectHints = SDK_HINTS,
  now: Date = new Date(),
): string {
  const first = `failed to connect to ${f.address}: ${whatHappened(f, hints, now)}`;
  const second = whatToDo(f, hints);
  return second === undefined ? first : `${first}\n${second}`;
}

/**
 * The SDK's error for a connection that failed before the agent protocol started (network, TLS,
 * certificate, pin): a BurrowAgentError without a code whose `failure` says why, so programs and
 * the CLI can word the advice their own way with describeConnectFailure().
 * @example
 * catch (err) { if (err instanceof BurrowConnectError && err.failure.kind === 'untrusted') askForCa(); }
 */
export class BurrowConnectError extends BurrowAgentError {
  readonly failure: ConnectFailure;

  constructor(failure: ConnectFailure, options?: { cause?: unknown }) {
    super(describeConnectFailure(failure), undefined, options);
    this.name = 'BurrowConnectError';
    this.failure = failure;
  }
}

/** Authtoken refusals of the server, each with what to do. */
const AUTH_ADVICE: Record<string, (hints: ConnectHints) => string> = {
  ERR_NGROK_4018: (h) => authtokenAdvice(h),
  ERR_NGROK_105: (h) => authtokenAdvice(h),
  ERR_NGROK_107: (h) => `The credential may have been deleted. ${authtokenAdvice(h)}`,
  ERR_NGROK_636: () =>
    'Activate its bot user (PATCH /bot_users/{id} with {"active": true}) or use another authtoken.',
};

function authtokenAdvice(hints: ConnectHints): string {
  return (
    'Create an authtoken with the management API, POST /credentials (the reply shows its `token` ' +
    `once), and pass it with ${hints.authtoken}.`
  );
}

/**
 * The one- or two-line message for any error of connect(): connection failures are worded with
 * `hints`, authtoken refusals get the server's message and code plus how to get a good token,
 * anything else its message (and code).
 * @example process.stderr.write(`burrow: ${describeConnectError(err, CLI_HINTS)}\n`);
 */
export function describeConnectError(err: unknown, hints: ConnectHints = SDK_HINTS): string {
  if (err instanceof BurrowConnectError) return describeConnectFailure(err.failure, hints);
  if (err instanceof BurrowAgentError && err.code) {
    const advice = AUTH_ADVICE[err.code];
    const first = `${err.message} (${err.code})`;
    return advice ? `${first}\n${advice(hints)}` : first;
  }
  return err instanceof Error ? err.message : String(err);
}
