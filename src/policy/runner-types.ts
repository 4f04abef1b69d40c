import type {
  BodyRewrite,
  CompressionEncoding,
  ForwardInternal,
  Refusal,
  TlsTermination,
} from './actions/types.js';
import type { IpPolicyRule, PolicyEventSink } from './events.js';
import type { HeaderChanges } from './headers.js';
import type { SecretsLookup } from './secrets.js';
import type {
  ConnInput,
  EndpointInput,
  RequestInput,
  ResponseInput,
  TlsInput,
} from './variables.js';

/**
 * What the ingress and the policy runner (runner.ts) exchange: the runner's options, each phase's
 * input, and the decision the ingress applies.
 */

/** Variables set by `set-vars`, carried from one phase to the next by the caller. */
export type PolicyVars = Readonly<Record<string, unknown>>;

export interface PolicyRunnerOptions {
  /** The edge or endpoint id: it keys the event ring and appears in every event. */
  ownerId: string;
  /** Where events go (log actions and decisions); default: dropped. */
  events?: PolicyEventSink | undefined;
  /**
   * The rules of IP policies (`restrict-ips` `ip_policies`), looked up when a client arrives, so
   * edits to the policies apply at once. Cache in here if lookups are costly.
   */
  ipPolicyRules?: ((ids: readonly string[]) => Promise<readonly IpPolicyRule[]>) | undefined;
  /** Clock in milliseconds (rate-limit windows, `time.now`, event times); default Date.now. */
  now?: (() => number) | undefined;
  /** Whether an internal endpoint serves a URL now (forward-internal `on_error: continue`). */
  internalOnline?: ((url: string) => boolean) | undefined;
  /**
   * What `secrets.get('vault', 'name')` reads (the edge's SecretsResolver); without it every
   * lookup fails with an `error` event. Once the policy has read a value, its events are redacted.
   */
  secrets?: SecretsLookup | undefined;
}

/**
 * How the ingress ends a connection's TLS for terminate-tls: resolves with the TLS facts of the
 * finished handshake (negotiated version, cipher, client certificate), or undefined when the
 * handshake failed (the connection is gone).
 */
export type TlsTerminator = (settings: TlsTermination) => Promise<TlsInput | undefined>;

export interface TcpConnectInput {
  conn: ConnInput;
  endpoint?: EndpointInput | undefined;
  vars?: PolicyVars | undefined;
  /** Given by ingresses that can end TLS here (TLS endpoints); without it terminate-tls closes. */
  terminateTls?: TlsTerminator | undefined;
}
export interface HttpRequestInput extends TcpConnectInput {
  req: RequestInput;
}
export interface HttpResponseInput extends HttpRequestInput {
  res: ResponseInput;
}

export type TcpConnectDecision =
  | {
      kind: 'continue';
      vars: PolicyVars;
      forwardInternal?: ForwardInternal | undefined;
      /** terminate-tls ended the client's TLS: relay the plaintext, not the TLS bytes. */
      tlsTerminated?: boolean | undefined;
    }
  | { kind: 'close'; vars: PolicyVars };

/** An answer for the client: status, lower-case headers, and a (possibly empty) body. */
export interface RespondDecision {
  kind: 'respond';
  status: number;
  headers: Readonly<Record<string, string>>;
  body: string;
  /** The edge's own refusal: written as its error page when `body` is empty. */
  refusal?: Refusal | undefined;
  vars: PolicyVars;
}

export type HttpRequestDecision =
  | {
      kind: 'continue';
      /** Apply to the request before it goes upstream. */
      headers: HeaderChanges;
      /** The new request target (path and query) when url-rewrite changed it. */
      rewrite: string | undefined;
      vars: PolicyVars;
      /** Call each with the status the client got, once the response is written. */
      afterResponse?: ReadonlyArray<(status: number) => void> | undefined;
      /** forward-internal ended the phase: hand the request to this internal endpoint. */
      forwardInternal?: ForwardInternal | undefined;
      /** request-body-find-replace: stream the request body through this rewrite. */
      bodyRewrite?: BodyRewrite | undefined;
    }
  | RespondDecision
  | { kind: 'close'; vars: PolicyVars };

export type HttpResponseDecision =
  | {
      kind: 'continue';
      /** Apply to the response before it is written to the client. */
      headers: HeaderChanges;
      /** Pipe the body through this zlib encoder (headers already say so). */
      compress: CompressionEncoding | undefined;
      /** response-body-find-replace, sse-find-replace: stream the body through this rewrite first. */
      bodyRewrite?: BodyRewrite | undefined;
      vars: PolicyVars;
    }
  /** Replace the upstream response with this one. */
  | RespondDecision;
