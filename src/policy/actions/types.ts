import type { RE2JS } from 're2js';
import type { CompiledExpression, ExpressionScope } from '../cel.js';
import type { IpPolicyRule, PolicyEventOutcome } from '../events.js';
import type { HeaderEdits } from '../headers.js';
import type { Template } from '../interpolate.js';
import type { PolicyPhase, PolicyProtocol } from '../parse.js';
import type { Activation } from '../variables.js';
import type { ConfigReader } from './config.js';

/**
 * The contract between the engine and its actions. An action is compiled once per policy (its
 * config checked, its expressions and templates compiled) and then run per connection, request
 * or response against a {@link PhaseContext}. Running returns nothing to continue, or a
 * {@link Terminal} that ends the phase.
 */

/** How an action ends a phase. */
export type Termination =
  /** Always ends the phase (deny, custom-response, close-connection). */
  | 'always'
  /** Ends it only when it refuses or matches (restrict-ips, rate-limit, basic-auth, redirect). */
  | 'conditionally'
  /** Never ends it (add-headers, log, set-vars, ...). */
  | 'never';

/**
 * Why the edge itself refused a request (restrict-ips, deny): the ingress answers with its error
 * page for it (HTML or text, with the Burrow-Error-Code header) instead of an empty body.
 */
export interface Refusal {
  code: string;
  title: string;
  message: string;
}

/** An answer that ends the phase: reply with this response, or close the connection. */
export type Terminal =
  | {
      kind: 'respond';
      status: number;
      headers: Readonly<Record<string, string>>;
      body: string;
      refusal?: Refusal | undefined;
    }
  | { kind: 'close' }
  /** forward-internal: hand the request or connection to an internal endpoint. */
  | ({ kind: 'forward-internal' } & ForwardInternal);

/** Where forward-internal hands a request or connection, and what to do when it cannot. */
export interface ForwardInternal {
  url: string;
  onError: 'continue' | 'halt';
  /** `url` parsed (internalTarget), when the action already did: the ingress need not again. */
  target?: InternalTarget | undefined;
}

/** An internal endpoint a forward-internal URL names (see forward-internal.ts internalTarget). */
export interface InternalTarget {
  readonly scheme: string;
  /** The registry key: the name (http, https, tls) or `name:port` (tcp). */
  readonly key: string;
  readonly host: string;
}

/** What running an action gives: undefined continues with the next action. */
export type ActionOutcome = Terminal | undefined;

/** Closing needs no data, so every close shares this answer. */
export const CLOSE: Terminal = Object.freeze({ kind: 'close' });

/** What an action can see and change while it runs. */
export interface PhaseContext {
  readonly phase: PolicyPhase;
  readonly activation: Activation;
  /** Header edits of the message this phase handles (request or response); undefined in on_tcp_connect. */
  readonly headers: HeaderEdits | undefined;
  /** Set by url-rewrite: the new request target (path and query). */
  rewrite: string | undefined;
  /** Set by compress-response: the content encoding the ingress should apply. */
  compress: CompressionEncoding | undefined;
  /** Set by the find-replace actions: the body rewrite the ingress should stream this message through. */
  bodyRewrite: BodyRewrite | undefined;
  /** Make a header edit visible to later expressions (`req.headers`, `res.headers`). */
  publishHeaders(): void;
  setVar(name: string, value: unknown): void;
  /** Render a template; a failing expression is recorded as an error event and renders as ''. */
  render(template: Template, groups?: ArrayLike<string | undefined>): string;
  /** Evaluate an expression; a failure is recorded as an error event and gives undefined. */
  value(expression: CompiledExpression): unknown;
  /** Record an event for the running rule and action. */
  event(outcome: PolicyEventOutcome, message: string, metadata?: Record<string, unknown>): void;
  /** The per-binding state of an action (rate-limit counters), created on first use. */
  state<T>(owner: object, create: () => T): T;
  /** The rules of IP policies, resolved through the binding's dependency. */
  ipPolicyRules(ids: readonly string[]): Promise<readonly IpPolicyRule[]>;
  /** The binding's clock, in milliseconds. */
  now(): number;
  /**
   * The whole request body (on_http_request), read on first call and then kept for the upstream;
   * rejects when the ingress gave no body reader or the body is over its limit. Only actions that
   * must see the body (verify-webhook) call it, so other policies keep streaming.
   */
  requestBody(): Promise<Buffer>;
  /** Call `observer` with the status the client got, once the response is written (circuit-breaker). */
  afterResponse(observer: (status: number) => void): void;
  /**
   * Whether an internal endpoint serves `url` now (forward-internal's on_error: continue); undefined
   * when the runner was given no way to tell.
   */
  internalOnline(url: string): boolean | undefined;
  /** Publish an action's result as `actions.ngrok.<name>` for later expressions, in every later phase. */
  setActionResult(name: string, value: Record<string, unknown>): void;
  /**
   * Whether setActionResult keeps anything: false when no expression of the policy reads
   * `actions`, so an action on the per-request path need not build its result.
   */
  readonly recordsResults: boolean;
  /**
   * terminate-tls (on_tcp_connect of TLS endpoints): end the client's TLS at the edge with
   * `settings`. Resolves true once the handshake (and the client certificate check) passed; from
   * then on `conn.tls` shows the negotiated version, cipher and client certificate, and the
   * ingress relays plaintext. Resolves false when the handshake failed or the ingress cannot
   * terminate this connection (the action then closes it). A second call keeps the first's TLS.
   */
  terminateTls(settings: TlsTermination): Promise<boolean>;
}

/** How a client certificate is asked for (ngrok's `mutual_tls_verification_strategy`). */
export type ClientCertificateStrategy = 'require-and-verify' | 'require-any' | 'request';

/** TLS termination as terminate-tls configured it, checked and parsed when the policy compiled. */
export interface TlsTermination {
  /** `1.2` or `1.3`. */
  readonly minVersion: TlsVersion;
  readonly maxVersion: TlsVersion;
  /** A certificate of the policy's own (chain, leaf first, and key, PEM); else the edge's for the name. */
  readonly certificate: { readonly certPem: string; readonly keyPem: string } | undefined;
  /** CA certificates (PEM) client certificates are checked against; undefined asks for none. */
  readonly clientCas: readonly string[] | undefined;
  /** How client certificates are asked for; only meaningful with clientCas or a strategy given. */
  readonly clientAuth: ClientCertificateStrategy | undefined;
}

export type TlsVersion = '1.2' | '1.3';

export type CompressionEncoding = 'br' | 'gzip' | 'deflate';

/** One find-replace of request-body-find-replace, response-body-find-replace or sse-find-replace. */
export interface BodyReplacement {
  readonly regex: RE2JS;
  /** The text for one match: `groups[0]` is the match, `groups[1]`… its groups. */
  readonly replace: (groups: ArrayLike<string | undefined>) => string;
  /** sse-find-replace: the event field it changes (default `data`). */
  readonly field?: 'data' | 'retry' | undefined;
}

/** How the ingress rewrites a body as it streams: whole text (`body`) or event by event (`sse`). */
export interface BodyRewrite {
  readonly kind: 'body' | 'sse';
  readonly replacements: readonly BodyReplacement[];
}

/** An action ready to run. */
export interface CompiledAction {
  /** True when this instance always ends the phase (for 2207: what follows is unreachable). */
  readonly alwaysTerminates: boolean;
  /** IP policy ids this action resolves at run time. */
  readonly ipPolicyIds?: readonly string[];
  /**
   * It only edits the message's headers, with names and values fixed when it was compiled: it
   * makes the same edits whatever the traffic (remove-headers; add-headers without `${}`), so a
   * phase of nothing else can be run once and its edits reused (CompiledPolicy.fixedEdits).
   */
  readonly fixedHeaderEdits?: boolean;
  run(ctx: PhaseContext): ActionOutcome | Promise<ActionOutcome>;
}

/** What compiling an action's config needs. */
export interface ActionCompileContext {
  readonly phase: PolicyPhase;
  readonly protocol: PolicyProtocol;
  /**
   * Compile a CEL expression found in config key `key` (throws 2200 naming the key); `scope`
   * `retry` adds http-request's retry variables.
   */
  expression(
    source: string,
    key: string,
    purpose: 'condition' | 'value',
    scope?: ExpressionScope,
  ): CompiledExpression;
  /**
   * Compile a `${}` template found in config key `key` (throws 2200 naming the key). It may read
   * secrets only by comparing them (`==`, `!=`): its text can reach events, logs or later rules.
   */
  template(text: string, key: string, maxGroup?: number): Template;
  /**
   * Compile a template whose text the action sends as it is (a header value or a body the policy
   * adds or answers with), so `${secrets.get('vault', 'secret')}` may place a secret in it.
   */
  outboundTemplate(text: string, key: string): Template;
}

/** One action type: where it may run, what config it takes, how it compiles. */
export interface ActionSpec {
  readonly type: string;
  readonly phases: readonly PolicyPhase[];
  /** The endpoint protocols it runs on, when not every protocol that runs its phases (terminate-tls: tls). */
  readonly protocols?: readonly PolicyProtocol[];
  readonly termination: Termination;
  /** The config keys it accepts; any other key is refused (2203). */
  readonly configKeys: readonly string[];
  compile(config: ConfigReader, ctx: ActionCompileContext): CompiledAction;
}
