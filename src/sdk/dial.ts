/**
 * The TLS connection to the agent listener, and its verification: the chain must lead to the
 * system roots or a given CA, or, with a pinned fingerprint, to exactly the pinned certificate;
 * the certificate must carry the name dialled. Nothing is written on the socket before both
 * checks passed, so the authtoken never reaches a server that failed them.
 */
import { X509Certificate } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import { splitSubjectAltName } from '../core/x509-names.js';
import { BURROW_ALPN, slabReads } from '../protocol/index.js';
import {
  BurrowConnectError,
  connectFailureKind,
  type ConnectFailure,
  type PresentedCertificate,
} from './connect-errors.js';
import { BurrowAgentError } from './errors.js';
import { formatFingerprint, trustContext, type EdgeTrust } from './trust.js';

/** Where the agent listener is, split from `host:port`. */
export interface ServerAddress {
  host: string;
  port: number;
}

/**
 * Split `host:port` (IPv6 in brackets); the port defaults to 443 like the other SDKs.
 * @example parseServerAddr('edge.example.com:4443') // { host: 'edge.example.com', port: 4443 }
 */
export function parseServerAddr(addr: string): ServerAddress {
  const hp = parseHostPort(addr.trim(), { port: 'optional', minPort: 1 });
  if (!hp || /\s/.test(hp.host)) {
    throw new BurrowAgentError(`serverAddr must be host:port (e.g. 127.0.0.1:4443), got '${addr}'`);
  }
  return { host: hp.host, port: hp.port ?? 443 };
}

/** How dialEdge() connects: where, what it trusts, and its limits. */
export interface DialOptions {
  address: ServerAddress;
  /** What to trust; a pinned certificate learnt on the first dial is kept in it for the next. */
  trust: EdgeTrust;
  /** Name to verify the certificate against; default the host (no SNI for IP literals). */
  serverName: string | undefined;
  /** Offer ALPN `burrow/1` so both ends use the large stream window. */
  offerAlpn: boolean;
  timeoutMs: number;
}

/** OpenSSL's words for the verification codes people search for, as Node would have thrown them. */
const VERIFY_TEXT: Record<string, string> = {
  SELF_SIGNED_CERT_IN_CHAIN: 'self-signed certificate in certificate chain',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed certificate',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'unable to verify the first certificate',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'unable to get local issuer certificate',
  CERT_SIGNATURE_FAILURE: 'certificate signature failure',
};

/** Node's message, but OpenSSL's `…:SSL routines:ssl3_get_record:wrong version number:…` cut to its reason. */
function errorText(err: NodeJS.ErrnoException): string {
  const reason = /SSL routines:[^:]*:([^:]+):/.exec(err.message)?.[1];
  return reason === undefined ? err.message : `${reason}, ${err.code ?? 'SSL error'}`;
}

/** The chain as the server presented it (completed by Node from the trust store), leaf first. */
function presentedChain(socket: tls.TLSSocket): Array<{ pem: string; cert: PresentedCertificate }> {
  const chain: Array<{ pem: string; cert: PresentedCertificate }> = [];
  const seen = new Set<string>();
  let peer: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (peer?.raw && !seen.has(peer.fingerprint256)) {
    seen.add(peer.fingerprint256);
    // Typed as a string, but a subject with two CNs gives an array.
    const cn: unknown = peer.subject?.CN;
    const name = Array.isArray(cn) ? String(cn[0]) : typeof cn === 'string' ? cn : undefined;
    chain.push({
      pem: new X509Certificate(peer.raw).toString(),
      cert: {
        name: name ?? JSON.stringify(peer.subject),
        fingerprint: formatFingerprint(peer.fingerprint256),
        // From Node's text: the SDK does not load @peculiar/x509 (it needs a global polyfill).
        altNames: splitSubjectAltName(peer.subjectaltname).map((n) => n.value),
        validFrom: new Date(peer.valid_from),
        validTo: new Date(peer.valid_to),
      },
    });
    peer = peer.issuerCertificate;
  }
  return chain;
}

/**
 * A TLS handshake that accepts any certificate, so that the caller can verify it and explain a
 * refusal with the chain in hand (Node's own rejection destroys the socket before that). Node still
 * verifies: `authorized` and `authorizationError` carry its verdict.
 */
function handshake(
  options: DialOptions,
  secureContext: tls.SecureContext,
  alpn: string[],
  failure: (f: Omit<ConnectFailure, 'address' | 'serverName'>) => BurrowConnectError,
): Promise<tls.TLSSocket> {
  const { host, port } = options.address;
  const name = options.serverName ?? host;
  return new Promise((resolve, reject) => {
    // The link carries every proxied byte: read it into slabs rather than a buffer per TLS record.
    const reads = slabReads();
    const connectOptions: tls.ConnectionOptions & { onread: net.OnReadOpts } = {
      host,
      port,
      ...(net.isIP(name) ? {} : { servername: name }),
      checkServerIdentity: (_h: string, cert) => tls.checkServerIdentity(name, cert),
      secureContext,
      rejectUnauthorized: false,
      ALPNProtocols: alpn,
      onread: reads.onread,
    };
    const socket = tls.connect(connectOptions);
    reads.attach(socket);
    const timer = setTimeout(
      () =>
        fail(
          failure({
            kind: 'timeout',
            code: undefined,
            detail: 'timeout',
            chain: [],
            timeoutMs: options.timeoutMs,
          }),
        ),
      options.timeoutMs,
    );
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const onError = (err: NodeJS.ErrnoException): void => {
      const code = err.code;
      fail(failure({ kind: connectFailureKind(code), code, detail: errorText(err), chain: [] }));
    };
    socket.once('error', onError);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      socket.off('error', onError);
      // Until the caller listens: a reset while it verifies must not crash the process.
      socket.on('error', () => undefined);
      resolve(socket);
    });
  });
}

/**
 * Open the TLS connection to the agent listener and verify it: against the system roots plus the
 * extra CAs, or with a pin against the pinned certificate. The first dial with a pin and no
 * matching CA at hand takes one handshake to find the pinned certificate in the server's chain
 * (sending nothing), then connects again trusting only that certificate, so OpenSSL checks every
 * signature: a chain that merely *contains* a copy of the pinned CA proves nothing. Rejects with a
 * BurrowConnectError that says what failed.
 * @example const socket = await dialEdge({ address, trust, serverName: undefined, offerAlpn: true, timeoutMs: 10_000 });
 */
export async function dialEdge(options: DialOptions): Promise<tls.TLSSocket> {
  const { trust } = options;
  const address = formatHostPort(options.address.host, options.address.port);
  const serverName = options.serverName ?? options.address.host;
  const failure = (f: Omit<ConnectFailure, 'address' | 'serverName'>, cause?: unknown) =>
    new BurrowConnectError({ ...f, address, serverName }, { cause });

  // The pin as presented certificates' fingerprints are written, to compare with them.
  const pin = trust.pin === undefined ? undefined : formatFingerprint(trust.pin);
  if (pin !== undefined && trust.pinned === undefined) {
    const probe = await handshake(options, trustContext(trust), [], failure);
    const chain = presentedChain(probe);
    probe.destroy();
    const match = chain.find((c) => c.cert.fingerprint === pin);
    if (!match) {
      throw failure({
        kind: 'pin-mismatch',
        code: undefined,
        detail: 'pinned certificate not presented',
        chain: chain.map((c) => c.cert),
        pin,
      });
    }
    trust.pinned = match.pem;
  }

  const socket = await handshake(
    options,
    trustContext(trust),
    options.offerAlpn ? [BURROW_ALPN] : [],
    failure,
  );
  const chain = presentedChain(socket);
  let problem: Omit<ConnectFailure, 'address' | 'serverName'> | undefined;
  if (!socket.authorized) {
    // Typed as an Error, but Node stores the code (or the message when there is none) here.
    const code = String(socket.authorizationError);
    const text = VERIFY_TEXT[code];
    problem = {
      kind: connectFailureKind(code),
      code,
      detail: text ? `${text}, ${code}` : code,
      chain: chain.map((c) => c.cert),
    };
  } else if (pin !== undefined && !chain.some((c) => c.cert.fingerprint === pin)) {
    problem = {
      kind: 'pin-mismatch',
      code: undefined,
      detail: 'pinned certificate not in the verified chain',
      chain: chain.map((c) => c.cert),
      pin,
    };
  }
  if (problem) {
    socket.destroy();
    throw failure(problem);
  }
  socket.setKeepAlive(true, 30_000);
  return socket;
}
