import { LRUCache } from 'lru-cache';
import { quote } from '../core/quote.js';
import { CODES, ValidationError } from '../core/errors.js';
import { ConfigReader } from './actions/config.js';
import type { ActionCompileContext, CompiledAction } from './actions/types.js';
import { compileExpression, ExpressionError, type CompiledExpression } from './cel.js';
import { compileTemplate, GroupReferenceError, type Template } from './interpolate.js';
import {
  parsePolicyDocument,
  POLICY_PHASES,
  toPhases,
  type ExpressionErrorChoice,
  type PhasedRule,
  type PolicyDocument,
  type PolicyRule,
  type PolicyPhase,
  type PolicyProtocol,
} from './parse.js';
import {
  actionWhere,
  checkPhases,
  checkPlacement,
  refuseUnreachable,
  resolveAction,
  ruleWhere,
} from './placement.js';
import { PolicyRunner, type PolicyRunnerOptions } from './runner.js';
import { secretCall, type SecretRead, type SecretRef } from './secrets.js';

/** One action of a compiled rule. */
export interface CompiledRuleAction {
  readonly index: number;
  readonly type: string;
  readonly action: CompiledAction;
}

/** A rule ready to run: its conditions (ANDed; none = always) and its actions in order. */
export interface CompiledRule {
  /** Index in the list the document wrote it in. */
  readonly index: number;
  readonly name: string | null;
  readonly conditions: readonly CompiledExpression[];
  readonly actions: readonly CompiledRuleAction[];
  /** What an expression that fails at run time counts as: `match` (true) or `skip` the rule. */
  readonly onExpressionError: ExpressionErrorChoice;
}

/**
 * Actions that keep traffic out (refuse, authenticate, limit): a rule with one of them fails
 * closed by default, so a mistyped `deny` rule refuses rather than lets everyone through.
 */
const GUARD_ACTIONS: ReadonlySet<string> = new Set([
  'deny',
  'close-connection',
  'restrict-ips',
  'rate-limit',
  'basic-auth',
  'jwt-validation',
  'oauth',
  'openid-connect',
  'verify-webhook',
]);

/**
 * The documented default when an expression of `rule` fails at run time: a rule that guards
 * runs its actions (`match`), any other rule is skipped.
 * @example expressionFailureDefault({ expressions: [], actions: [{ type: 'deny', config: null }] }) // 'match'
 */
export function expressionFailureDefault(rule: PolicyRule): ExpressionErrorChoice {
  return rule.actions.some((a) => GUARD_ACTIONS.has(a.type)) ? 'match' : 'skip';
}

export interface CompilePolicyOptions {
  /** The endpoint's protocol: it decides which phases run and where `inbound` goes. */
  protocol: PolicyProtocol;
  /** The API field the text came from, for error messages (default `traffic_policy`). */
  field?: string;
}

/**
 * A validated, compiled policy: immutable and shareable (the compile cache hands the same
 * instance to every endpoint with the same text). Per-endpoint state lives in a
 * {@link PolicyRunner}, made with {@link CompiledPolicy.bind}.
 */
export class CompiledPolicy {
  /** Every IP policy id restrict-ips actions resolve, so callers can watch or preload them. */
  readonly ipPolicyIds: readonly string[];
  constructor(
    readonly protocol: PolicyProtocol,
    readonly phases: Readonly<Record<PolicyPhase, readonly CompiledRule[]>>,
    /** Every `secrets.get` the policy makes, with where: a bind checks the vaults' grant. */
    readonly secretReads: readonly SecretRead[] = [],
    /**
     * It reads `req.ts.body_received` or `req.trailers`: on_http_request reads the body whole
     * before its rules.
     */
    readonly waitsForBody = false,
    /**
     * Some expression may read `actions` (the results of earlier actions): when none can, the
     * runner does not record them, which would cost copies of the variables on every request.
     */
    readonly readsActionResults = true,
  ) {
    const ids = new Set<string>();
    for (const phase of POLICY_PHASES) {
      for (const rule of phases[phase]) {
        for (const { action } of rule.actions)
          for (const id of action.ipPolicyIds ?? []) ids.add(id);
      }
    }
    this.ipPolicyIds = [...ids];
    this.fixedEdits = new Set(
      (['on_http_request', 'on_http_response'] as const).filter((phase) =>
        fixedHeaderPhase(phases[phase], readsActionResults, waitsForBody),
      ),
    );
  }

  /**
   * The HTTP phases whose rules only make fixed header edits, unconditionally (a response's
   * security headers, say): every run makes the same edits, so the runner runs such a phase once
   * and reuses its edits, the rules not evaluated again per request.
   */
  readonly fixedEdits: ReadonlySet<PolicyPhase>;

  /** Whether the policy has rules for `phase`; the ingress can skip a phase that has none. */
  has(phase: PolicyPhase): boolean {
    return this.phases[phase].length > 0;
  }

  /**
   * A runner for one owner (an edge, an endpoint): it keeps that owner's rate-limit counters and
   * sends its events to `options.events`.
   * @example const runner = policy.bind({ ownerId: 'edgtls_…', events: eventLog });
   */
  bind(options: PolicyRunnerOptions): PolicyRunner {
    return new PolicyRunner(this, options);
  }
}

/**
 * Whether `rules` make the same header edits on every run: each without conditions, each action a
 * fixed header edit, and nothing recorded that a run could tell apart (action results, a body
 * waited for).
 */
function fixedHeaderPhase(
  rules: readonly CompiledRule[],
  readsActionResults: boolean,
  waitsForBody: boolean,
): boolean {
  if (rules.length === 0 || readsActionResults || waitsForBody) return false;
  return rules.every(
    (rule) =>
      rule.conditions.length === 0 && rule.actions.every(({ action }) => action.fixedHeaderEdits),
  );
}

function expressionError(
  where: string,
  what: string,
  source: string,
  err: unknown,
  field: string,
): never {
  if (!(err instanceof ExpressionError)) throw err;
  throw new ValidationError(
    err.code,
    field,
    `${where}: ${what} ${quote(source, '"')} is not a valid expression: ${err.message}`,
    { cause: err },
  );
}

/** A template that places a secret where its text is not sent as it is: refused, naming both. */
function misplacedSecret(
  at: string,
  key: string,
  refs: readonly SecretRef[],
  field: string,
): never {
  const call = refs.map(secretCall).join(', ');
  throw new ValidationError(
    CODES.policyInvalidExpression,
    field,
    `${at}: config.${key} places ${call} in text that events, logs or later rules can read; a secret may be placed whole only in a header value or body the policy sends (add-headers headers, custom-response body and headers, http-request headers and body), or compared with == or !=`,
  );
}

/**
 * What reads as a template in a field that takes its text as it is: `${` (not `$${`), then a
 * name, up to a `}` (`${req.url.authority}`, `${conn.client_ip}`).
 */
const INTERPOLATION = /(?<!\$)\$\{\s*[A-Za-z_][^}]*\}/;

/** Keys whose values are secrets or credentials: any text is theirs, `${` included. */
const LITERAL_KEYS = new Set(['credentials', 'secret', 'client_secret', 'password']);

/**
 * Refuse a `${…}` in a config value the action takes as it is (no interpolation there), which
 * would otherwise reach the action literally and, say, never match: ngrok users write them in
 * any field, so the difference must be said at save.
 */
function refuseUninterpolated(
  config: unknown,
  interpolated: ReadonlySet<string>,
  at: string,
  field: string,
  path = 'config',
): void {
  if (typeof config === 'string') {
    if (!INTERPOLATION.test(config) || interpolated.has(config)) return;
    throw new ValidationError(
      CODES.policyActionValue,
      field,
      `${at}: ${path} holds ${quote(config, '"')}, but this field is not interpolated: its \${…} would be taken literally and never evaluated`,
    );
  }
  if (Array.isArray(config)) {
    config.forEach((v, i) => refuseUninterpolated(v, interpolated, at, field, `${path}[${i}]`));
  } else if (config !== null && typeof config === 'object') {
    for (const [k, v] of Object.entries(config)) {
      if (!LITERAL_KEYS.has(k)) refuseUninterpolated(v, interpolated, at, field, `${path}.${k}`);
    }
  }
}

function compileRule(
  rule: PhasedRule,
  phase: PolicyPhase,
  protocol: PolicyProtocol,
  field: string,
  secretReads: SecretRead[],
): CompiledRule {
  const where = ruleWhere(phase, rule);
  const reads = (refs: readonly SecretRef[], at: string): void => {
    for (const ref of refs) secretReads.push({ ...ref, where: at });
  };
  const conditions = rule.expressions.map((source, i) => {
    let compiled: CompiledExpression;
    try {
      compiled = compileExpression(source, phase, 'condition');
    } catch (err) {
      return expressionError(where, `expressions[${i}]`, source, err, field);
    }
    reads(compiled.secrets, `${where}, expressions[${i}]`);
    return compiled;
  });
  const actions: CompiledRuleAction[] = [];
  let terminating: CompiledRuleAction | undefined;
  rule.actions.forEach(({ type, config }, index) => {
    const at = actionWhere(where, index, type);
    if (terminating) refuseUnreachable(where, terminating, { index, type }, field);
    const spec = resolveAction(type, at, field);
    checkPlacement(spec, phase, protocol, at, field);
    const reader = ConfigReader.open(config, spec.configKeys, at, field);
    /** Texts compiled as templates or expressions: any other `${` in the config is refused. */
    const interpolated = new Set<string>();
    /** `outbound`: the action sends the text as it is, so it may place a secret whole. */
    const template = (
      text: string,
      key: string,
      maxGroup: number | undefined,
      outbound: boolean,
    ): Template => {
      interpolated.add(text);
      let compiled: Template;
      try {
        compiled = compileTemplate(text, phase, maxGroup, outbound);
      } catch (err) {
        if (err instanceof GroupReferenceError) return reader.fail(key, err.message);
        return expressionError(at, `config.${key}`, text, err, field);
      }
      if (compiled.placesSecret && !outbound) misplacedSecret(at, key, compiled.secrets, field);
      reads(compiled.secrets, `${at}, config.${key}`);
      return compiled;
    };
    const ctx: ActionCompileContext = {
      phase,
      protocol,
      expression(source, key, purpose, scope) {
        interpolated.add(source);
        let compiled: CompiledExpression;
        try {
          compiled = compileExpression(source, phase, purpose, scope);
        } catch (err) {
          return expressionError(at, `config.${key}`, source, err, field);
        }
        if (compiled.bareSecret) misplacedSecret(at, key, compiled.secrets, field);
        reads(compiled.secrets, `${at}, config.${key}`);
        return compiled;
      },
      template: (text, key, maxGroup) => template(text, key, maxGroup, false),
      outboundTemplate: (text, key) => template(text, key, undefined, true),
    };
    const compiled = { index, type, action: spec.compile(reader, ctx) };
    refuseUninterpolated(config, interpolated, at, field);
    actions.push(compiled);
    if (compiled.action.alwaysTerminates) terminating = compiled;
  });
  return {
    index: rule.source.index,
    name: rule.name ?? null,
    conditions,
    actions,
    onExpressionError: rule.on_expression_error ?? expressionFailureDefault(rule),
  };
}

/**
 * Compile a parsed document for `protocol`, running every save-time check. Throws
 * {@link ValidationError} with the policy error codes (2200–2236) naming `field`.
 * @example compileDocument(parsePolicyValue(body.policy, 'policy'), { protocol: 'http', field: 'policy' })
 */
export function compileDocument(
  doc: PolicyDocument,
  options: CompilePolicyOptions,
): CompiledPolicy {
  const field = options.field ?? 'traffic_policy';
  const phases = toPhases(doc, options.protocol);
  checkPhases(phases, options.protocol, field);
  const compiled = {} as Record<PolicyPhase, CompiledRule[]>;
  const secretReads: SecretRead[] = [];
  for (const phase of POLICY_PHASES) {
    compiled[phase] = phases[phase].map((rule) =>
      compileRule(rule, phase, options.protocol, field, secretReads),
    );
  }
  // A mention anywhere counts (even in a string literal): the cost is only reading the body first.
  const text = JSON.stringify(doc);
  const waitsForBody = /\breq\s*\.\s*(?:ts\s*\.\s*body_received|trailers)\b/.test(text);
  // Likewise for `actions`, but not the rules' own `"actions":` key.
  const readsActionResults = /\bactions\b(?!":)/.test(text);
  return new CompiledPolicy(
    options.protocol,
    compiled,
    secretReads,
    waitsForBody,
    readsActionResults,
  );
}

/**
 * What a compiled policy weighs in the heap, estimated from its text: compiled CEL expressions
 * take up to about 25 times their source (measured), the rest less. Budgets of compiled policies
 * (this cache, the states binds keep: docs/security.md, "Budgets") count with it.
 * @example estimatedPolicyBytes(110_000) // 3_521_024
 */
export function estimatedPolicyBytes(textLength: number): number {
  return 32 * textLength + 1024;
}

const CACHE_LIMIT = 256;
/** Estimated bytes the cache may hold: a policy of 1 MiB (an agent's request limit) fits twice. */
const CACHE_MAX_BYTES = 64 * 1024 * 1024;
const cache = new LRUCache<string, CompiledPolicy>({
  max: CACHE_LIMIT,
  maxSize: CACHE_MAX_BYTES,
  sizeCalculation: (_policy, key) => estimatedPolicyBytes(key.length),
});

/** How many compiled policies the cache holds, and their estimated bytes (a gauge's reading). */
export function compiledPolicyCacheSize(): { entries: number; bytes: number } {
  return { entries: cache.size, bytes: cache.calculatedSize };
}

/**
 * Parse, validate and compile a policy (JSON or YAML text, either form, or an already parsed
 * document). Text is cached by protocol and content (least recently used first out), so a policy
 * shared by many endpoints, or re-read on every bind, is compiled once. Throws
 * {@link ValidationError}.
 * @example
 * const policy = compilePolicy(edge.traffic_policy.value, { protocol: 'tls', field: 'traffic_policy.value' });
 * const runner = policy.bind({ ownerId: edge.id, events });
 */
export function compilePolicy(
  source: string | PolicyDocument,
  options: CompilePolicyOptions,
): CompiledPolicy {
  if (typeof source !== 'string') return compileDocument(source, options);
  const key = `${options.protocol}\n${source}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const field = options.field ?? 'traffic_policy';
  const policy = compileDocument(parsePolicyDocument(source, field), options);
  // One too large for the budget is compiled each time rather than evicting every other.
  if (estimatedPolicyBytes(key.length) <= CACHE_MAX_BYTES / 2) cache.set(key, policy);
  return policy;
}
