/**
 * A compiled policy bound to one owner (an endpoint, an edge): each phase run over the plain
 * inputs the ingress gives, its rules in order, into the decision the ingress applies. What one
 * run sees and changes is a PhaseRun (phase-run.ts).
 */
import type {
  ActionOutcome,
  BodyRewrite,
  CompressionEncoding,
  ForwardInternal,
  Terminal,
} from './actions/types.js';
import { ACTION_RESULTS, PhaseRun, type VarsWithResults } from './phase-run.js';
import type { CompiledPolicy, CompiledRule } from './compile.js';
import { toJson } from './cel-types.js';
import {
  clientGeo,
  DISCARD_EVENTS,
  isoTime,
  redactStrings,
  type IpPolicyRule,
  type PolicyEventOutcome,
  type PolicyEventSink,
} from './events.js';
import { NO_HEADER_CHANGES, type HeaderChanges } from './headers.js';
import { timedBodyReader } from './request-detail-vars.js';
import { NO_SECRETS, SecretsVars } from './secrets.js';
import {
  ConnVars,
  EndpointVars,
  ReqVars,
  ResVars,
  TimeVars,
  type Activation,
  type EndpointInput,
} from './variables.js';
import type {
  HttpRequestDecision,
  HttpRequestInput,
  HttpResponseDecision,
  HttpResponseInput,
  PolicyRunnerOptions,
  PolicyVars,
  TcpConnectDecision,
  TcpConnectInput,
} from './runner-types.js';

export type * from './runner-types.js';
export type { ForwardInternal, InternalTarget, TlsTermination } from './actions/types.js';

const NO_VARS: PolicyVars = Object.freeze({});
const NO_RESULTS: Readonly<Record<string, unknown>> = Object.freeze({});

type Settled<T> = T | Promise<T>;

function then<T, R>(value: Settled<T>, fn: (v: T) => R): Settled<R> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}

/** A decision to relay the request with these changes. */
function continueRequest(
  headers: HeaderChanges,
  rewrite: string | undefined,
  vars: PolicyVars,
  afterResponse: Array<(status: number) => void> | undefined,
  forwardInternal: ForwardInternal | undefined,
  bodyRewrite: BodyRewrite | undefined,
): HttpRequestDecision {
  // Every property named even when unset, in one order: one object shape for V8.
  return {
    kind: 'continue',
    headers,
    rewrite,
    vars,
    afterResponse,
    forwardInternal,
    bodyRewrite,
  };
}

/** A decision to relay the response with these changes (one object shape, as above). */
function continueResponse(
  headers: HeaderChanges,
  compress: CompressionEncoding | undefined,
  bodyRewrite: BodyRewrite | undefined,
  vars: PolicyVars,
): HttpResponseDecision {
  return { kind: 'continue', headers, compress, bodyRewrite, vars };
}

/** `changes` made immutable, to be shared by every decision that reuses them. */
function frozen(changes: HeaderChanges): HeaderChanges {
  if (changes === NO_HEADER_CHANGES) return changes;
  return Object.freeze({
    remove: Object.freeze([...changes.remove]),
    add: Object.freeze(changes.add.map((pair) => Object.freeze([pair[0], pair[1]] as const))),
  });
}

/** What a forward-internal outcome tells the ingress (its parsed target too). */
function forwardOf(out: { kind: 'forward-internal' } & ForwardInternal): ForwardInternal {
  return { url: out.url, onError: out.onError, target: out.target };
}

/**
 * A compiled policy bound to one owner: runs each phase against plain variable objects and
 * returns the decision the ingress applies. Results are synchronous unless an action had to wait
 * (restrict-ips resolving `ip_policies`); then they are promises.
 */
export class PolicyRunner {
  readonly ownerId: string;
  readonly now: () => number;
  private readonly events: PolicyEventSink;
  private readonly lookup: PolicyRunnerOptions['ipPolicyRules'];
  /** @internal See PolicyRunnerOptions.internalOnline. */
  readonly internalOnline: PolicyRunnerOptions['internalOnline'];
  private readonly states = new WeakMap<object, unknown>();
  private readonly secrets: SecretsVars;
  /** Whether a phase makes only fixed edits (CompiledPolicy.fixedEdits): run once, then reused. */
  private readonly fixesRequest: boolean;
  private readonly fixesResponse: boolean;
  /** Those edits, once the phase ran. */
  private fixedRequestEdits: HeaderChanges | undefined;
  private fixedResponseEdits: HeaderChanges | undefined;
  private lastEndpoint: EndpointInput | undefined;
  private lastEndpointVars: EndpointVars | undefined;

  constructor(
    readonly policy: CompiledPolicy,
    options: PolicyRunnerOptions,
  ) {
    this.ownerId = options.ownerId;
    this.events = options.events ?? DISCARD_EVENTS;
    this.lookup = options.ipPolicyRules;
    this.now = options.now ?? Date.now;
    this.internalOnline = options.internalOnline;
    this.secrets = new SecretsVars(options.secrets ?? NO_SECRETS);
    this.fixesRequest = policy.fixedEdits.has('on_http_request');
    this.fixesResponse = policy.fixedEdits.has('on_http_response');
    if (policy.ipPolicyIds.length > 0 && !this.lookup) {
      throw new Error(
        `the policy of ${this.ownerId} uses ip_policies: pass ipPolicyRules to bind()`,
      );
    }
  }

  /** on_tcp_connect: decide whether a new connection may proceed. */
  onTcpConnect(input: TcpConnectInput): Settled<TcpConnectDecision> {
    const rules = this.policy.phases.on_tcp_connect;
    const vars = input.vars ?? NO_VARS;
    if (rules.length === 0) return { kind: 'continue', vars };
    const run = new PhaseRun('on_tcp_connect', this.activation(input, vars), this, undefined);
    run.terminator = input.terminateTls;
    return then(this.execute(run, rules, 0, 0), (out): TcpConnectDecision => {
      const vars = run.activation.vars;
      const tlsTerminated = run.tlsTerminated || undefined;
      if (out?.kind === 'forward-internal') {
        return { kind: 'continue', vars, forwardInternal: forwardOf(out), tlsTerminated };
      }
      if (out) return { kind: 'close', vars };
      return { kind: 'continue', vars, tlsTerminated };
    });
  }

  /** on_http_request: forward (with changes), answer directly, or close. */
  onHttpRequest(input: HttpRequestInput): Settled<HttpRequestDecision> {
    const rules = this.policy.phases.on_http_request;
    const vars = input.vars ?? NO_VARS;
    if (rules.length === 0) {
      return continueRequest(NO_HEADER_CHANGES, undefined, vars, undefined, undefined, undefined);
    }
    const fixed = this.fixedRequestEdits;
    if (fixed) return continueRequest(fixed, undefined, vars, undefined, undefined, undefined);
    const activation = this.activation(input, vars);
    const req = (activation.req = new ReqVars(input.req));
    const body = timedBodyReader(input.req, this.now);
    const run = new PhaseRun('on_http_request', activation, this, req, body);
    // A policy reading req.ts.body_received or req.trailers waits for the whole body (within the
    // limits of the body reader), so that its rules see when it came and what followed it.
    if (this.policy.waitsForBody && body && input.req.body_received === undefined) {
      return body().then(
        () => this.requestRules(run, rules),
        (err: Error): HttpRequestDecision => {
          run.event(
            'error',
            `the body could not be read for req.ts or req.trailers: ${err.message}`,
          );
          return { kind: 'close', vars: activation.vars };
        },
      );
    }
    return this.requestRules(run, rules);
  }

  private requestRules(
    run: PhaseRun,
    rules: readonly CompiledRule[],
  ): Settled<HttpRequestDecision> {
    // Not `then(…, closure)`: this runs for every request, and most rules decide at once.
    const out = this.execute(run, rules, 0, 0);
    if (out instanceof Promise) return out.then((o) => this.requestDecision(run, o));
    return this.requestDecision(run, out);
  }

  private requestDecision(run: PhaseRun, out: ActionOutcome): HttpRequestDecision {
    if (out && out.kind !== 'forward-internal') return this.terminal(out, run);
    let headers = run.headerChanges();
    if (this.fixesRequest) headers = this.fixedRequestEdits = frozen(headers);
    return continueRequest(
      headers,
      run.rewrite,
      run.activation.vars,
      run.observers,
      out && forwardOf(out),
      run.bodyRewrite,
    );
  }

  /** on_http_response: change the response (headers, compression) or replace it. */
  onHttpResponse(input: HttpResponseInput): Settled<HttpResponseDecision> {
    const rules = this.policy.phases.on_http_response;
    const vars = input.vars ?? NO_VARS;
    if (rules.length === 0) return continueResponse(NO_HEADER_CHANGES, undefined, undefined, vars);
    const fixed = this.fixedResponseEdits;
    if (fixed) return continueResponse(fixed, undefined, undefined, vars);
    const activation = this.activation(input, vars);
    activation.req = new ReqVars(input.req);
    const res = (activation.res = new ResVars(input.res));
    const run = new PhaseRun('on_http_response', activation, this, res);
    const out = this.execute(run, rules, 0, 0);
    if (out instanceof Promise) return out.then((o) => this.responseDecision(run, o));
    return this.responseDecision(run, out);
  }

  private responseDecision(run: PhaseRun, out: ActionOutcome): HttpResponseDecision {
    const vars = run.activation.vars;
    // close-connection cannot be placed in this phase, so a terminal here is a response.
    if (out?.kind === 'respond') return { ...out, vars };
    let headers = run.headerChanges();
    if (this.fixesResponse) headers = this.fixedResponseEdits = frozen(headers);
    return continueResponse(headers, run.compress, run.bodyRewrite, vars);
  }

  private activation(input: TcpConnectInput, vars: PolicyVars): Activation {
    return {
      conn: new ConnVars(input.conn),
      endpoint: this.endpointVars(input.endpoint),
      time: new TimeVars(this.now),
      // Read-only until set-vars copies it (PhaseRun.setVar), so callers' objects are not changed.
      vars: vars,
      actions: (vars as VarsWithResults)[ACTION_RESULTS] ?? NO_RESULTS,
      secrets: this.secrets,
    };
  }

  /**
   * `endpoint`'s variables: they only read it, so those of the endpoint the runner last saw (its
   * own, nearly always) serve again.
   */
  private endpointVars(endpoint: EndpointInput | undefined): EndpointVars {
    if (this.lastEndpointVars === undefined || this.lastEndpoint !== endpoint) {
      this.lastEndpoint = endpoint;
      this.lastEndpointVars = new EndpointVars(endpoint);
    }
    return this.lastEndpointVars;
  }

  private terminal(
    out: Exclude<Terminal, { kind: 'forward-internal' }>,
    run: PhaseRun,
  ): HttpRequestDecision {
    if (out.kind === 'close') return { kind: 'close', vars: run.activation.vars };
    return { ...out, vars: run.activation.vars };
  }

  /** Run rules from rule `ri`, action `ai` (ai > 0 resumes a rule that already matched). */
  private execute(
    run: PhaseRun,
    rules: readonly CompiledRule[],
    ri: number,
    ai: number,
  ): Settled<ActionOutcome> {
    for (; ri < rules.length; ri++, ai = 0) {
      const rule = rules[ri]!;
      run.rule = rule;
      if (ai === 0 && !this.matches(run, rule)) continue;
      for (; ai < rule.actions.length; ai++) {
        const { index, type, action } = rule.actions[ai]!;
        run.actionIndex = index;
        run.actionType = type;
        const out = action.run(run);
        if (out instanceof Promise) {
          const nextRule = ri;
          const nextAction = ai + 1;
          return out.then((o) => o ?? this.execute(run, rules, nextRule, nextAction));
        }
        if (out) return out;
      }
    }
    return undefined;
  }

  /**
   * All conditions true. An expression that fails to evaluate counts as the rule says
   * (`on_expression_error`; by default true for rules that guard, so they fail closed) and an
   * `error` event says so.
   */
  private matches(run: PhaseRun, rule: CompiledRule): boolean {
    run.actionIndex = -1;
    for (const condition of rule.conditions) {
      let result: unknown;
      try {
        result = condition.evaluate(run.activation);
      } catch (err) {
        const failClosed = rule.onExpressionError === 'match';
        run.event(
          'error',
          `expression ${JSON.stringify(condition.source)} failed: ${(err as Error).message.split('\n')[0]}; ${failClosed ? 'it counts as true, so the rule runs its actions (on_expression_error: match)' : 'the rule is skipped (on_expression_error: skip)'}`,
        );
        if (!failClosed) return false;
        continue;
      }
      if (result !== true) return false;
    }
    return true;
  }

  /** @internal Used by phase runs. */
  record(
    run: PhaseRun,
    outcome: PolicyEventOutcome,
    message: string,
    metadata: Record<string, unknown> | undefined,
  ): void {
    let meta = metadata === undefined ? null : (toJson(metadata) as Record<string, unknown>);
    // A value the policy read may reach a message (a failing conversion) or log metadata.
    if (this.secrets.used) {
      const lookup = this.secrets.lookup;
      message = lookup.redact(message);
      if (meta)
        meta = redactStrings(meta, (text) => lookup.redact(text)) as Record<string, unknown>;
    }
    this.events.record({
      timestamp: isoTime(this.now()),
      owner_id: this.ownerId,
      phase: run.phase,
      rule: { index: run.rule?.index ?? -1, name: run.rule?.name ?? null },
      action: run.actionIndex < 0 ? null : { index: run.actionIndex, type: run.actionType },
      outcome,
      message,
      client_ip: run.activation.conn.client_ip,
      ...clientGeo(run.activation.conn),
      metadata: meta,
    });
  }

  /** @internal Per-binding action state (rate-limit counters). */
  state<T>(owner: object, create: () => T): T {
    let value = this.states.get(owner) as T | undefined;
    if (value === undefined) this.states.set(owner, (value = create()));
    return value;
  }

  /** @internal */
  ipPolicyRules(ids: readonly string[]): Promise<readonly IpPolicyRule[]> {
    if (!this.lookup) return Promise.reject(new Error('no IP policy source was given'));
    return this.lookup(ids);
  }
}
