/**
 * One run of a policy phase (runner.ts): the variables its rules see, and what its actions change
 * (header edits, a new target, a body rewrite, compression, status observers, variables, action
 * results), kept until the runner turns them into the phase's decision. It is the
 * `PhaseContext` actions run against (actions/types.ts).
 */
import type {
  BodyRewrite,
  CompressionEncoding,
  PhaseContext,
  TlsTermination,
} from './actions/types.js';
import type { CompiledExpression } from './cel.js';
import type { CompiledRule } from './compile.js';
import type { IpPolicyRule, PolicyEventOutcome } from './events.js';
import { HeaderEdits, NO_HEADER_CHANGES, type HeaderChanges } from './headers.js';
import type { Template } from './interpolate.js';
import type { PolicyPhase } from './parse.js';
import type { PolicyRunner } from './runner.js';
import type { TlsTerminator } from './runner-types.js';
import { REDACTED } from './secrets.js';
import type { Activation, ReqVars, ResVars } from './variables.js';

/**
 * Where action results (`actions.ngrok.*`) ride along with the vars between phases: a symbol key,
 * so callers carry them without knowing, and `vars` in CEL (string keys only) never shows them.
 */
export const ACTION_RESULTS = Symbol('policy action results');
export type VarsWithResults = Record<string, unknown> & {
  [ACTION_RESULTS]?: Record<string, unknown>;
};

/**
 * The mutable state of one phase run: what actions see and change.
 * @example const run = new PhaseRun('on_http_request', activation, runner, new ReqVars(req));
 */
export class PhaseRun implements PhaseContext {
  rewrite: string | undefined;
  compress: CompressionEncoding | undefined;
  bodyRewrite: BodyRewrite | undefined;
  rule: CompiledRule | undefined;
  actionIndex = -1;
  actionType = '';
  observers: Array<(status: number) => void> | undefined;
  /** Set once terminate-tls's handshake finished. */
  tlsTerminated = false;
  /** The ingress's TLS terminator (on_tcp_connect of TLS endpoints). */
  terminator: TlsTerminator | undefined;
  #edits: HeaderEdits | undefined;
  #varsCopied = false;
  /** `actions.ngrok` of this run, once an action published a result (this run's own copy). */
  #ngrokResults: Record<string, unknown> | undefined;

  constructor(
    readonly phase: PolicyPhase,
    readonly activation: Activation,
    private readonly runner: PolicyRunner,
    private readonly message: ReqVars | ResVars | undefined,
    private readonly body?: (() => Promise<Buffer>) | undefined,
  ) {}

  async terminateTls(settings: TlsTermination): Promise<boolean> {
    if (this.tlsTerminated) return true;
    if (!this.terminator || this.phase !== 'on_tcp_connect') return false;
    const tls = await this.terminator(settings);
    if (!tls) return false;
    this.activation.conn.setTls(tls);
    this.tlsTerminated = true;
    return true;
  }

  requestBody(): Promise<Buffer> {
    if (!this.body || this.phase !== 'on_http_request') {
      return Promise.reject(new Error('the request body is not available in this phase'));
    }
    return this.body();
  }

  afterResponse(observer: (status: number) => void): void {
    (this.observers ??= []).push(observer);
  }

  get recordsResults(): boolean {
    return this.runner.policy.readsActionResults;
  }

  setActionResult(name: string, value: Record<string, unknown>): void {
    if (!this.recordsResults) return;
    let ngrok = this.#ngrokResults;
    if (!ngrok) {
      // Once per run: the results so far belong to the vars of an earlier phase (and its
      // decision), so this run writes to copies of its own, then adds to them in place.
      this.copyVars();
      const vars = this.activation.vars as VarsWithResults;
      const previous = vars[ACTION_RESULTS] ?? {};
      ngrok = this.#ngrokResults = { ...(previous.ngrok as Record<string, unknown>) };
      const results = { ...previous, ngrok };
      vars[ACTION_RESULTS] = results;
      this.activation.actions = results;
    }
    ngrok[name] = value;
  }

  private copyVars(): void {
    if (this.#varsCopied) return;
    const old = this.activation.vars as VarsWithResults;
    const copy: VarsWithResults = { ...old };
    if (old[ACTION_RESULTS]) copy[ACTION_RESULTS] = old[ACTION_RESULTS];
    this.activation.vars = copy;
    this.#varsCopied = true;
  }

  get headers(): HeaderEdits | undefined {
    if (!this.message) return undefined;
    return (this.#edits ??= new HeaderEdits());
  }

  headerChanges(): HeaderChanges {
    return this.#edits ? this.#edits.changes() : NO_HEADER_CHANGES;
  }

  publishHeaders(): void {
    if (this.message && this.#edits)
      this.message.setHeaderChanges(this.#edits.visibleChanges(REDACTED));
  }

  setVar(name: string, value: unknown): void {
    this.copyVars();
    this.activation.vars[name] = value;
  }

  render(template: Template, groups?: ArrayLike<string | undefined>): string {
    try {
      return template.render(this.activation, groups);
    } catch (err) {
      this.event(
        'error',
        `interpolating ${JSON.stringify(template.source)} failed: ${(err as Error).message}`,
      );
      return '';
    }
  }

  value(expression: CompiledExpression): unknown {
    try {
      return expression.evaluate(this.activation);
    } catch (err) {
      this.event(
        'error',
        `evaluating ${JSON.stringify(expression.source)} failed: ${(err as Error).message}`,
      );
      return undefined;
    }
  }

  event(outcome: PolicyEventOutcome, message: string, metadata?: Record<string, unknown>): void {
    this.runner.record(this, outcome, message, metadata);
  }

  state<T>(owner: object, create: () => T): T {
    return this.runner.state(owner, create);
  }

  ipPolicyRules(ids: readonly string[]): Promise<readonly IpPolicyRule[]> {
    return this.runner.ipPolicyRules(ids);
  }

  now(): number {
    return this.runner.now();
  }

  internalOnline(url: string): boolean | undefined {
    return this.runner.internalOnline?.(url);
  }
}
