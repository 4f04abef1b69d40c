import { BurrowError, CODES, type ErrorCode } from '../core/errors.js';
import { quote, shorten } from '../core/quote.js';
import { Environment, type ASTNode, type TypeCheckResult } from '@marcbachmann/cel-js';
import { ipInCidr, parseCidrCached, parseIp, type Cidr } from '../core/cidr.js';
import { MACRO_NAMESPACES, registerMacros } from './cel-macros.js';
import { CEL_TYPES } from './cel-types.js';
import { CLIENT_IP_INFO_FIELDS } from './ip-intel-vars.js';
import { deepest } from './document-limits.js';
import type { PolicyPhase } from './parse.js';
import { compileRegex, RE2_MATCHES } from './regex.js';
import { registerTextType } from './cel-text-types.js';
import {
  scanSecretUses,
  secretEquals,
  type SecretRef,
  type SecretsVars,
  type SecretText,
} from './secrets.js';
import type { Activation, ReqVars, ResVars } from './variables.js';
import { directReader, isNode } from './cel-direct.js';

/**
 * The CEL environments policies are written in, one per phase (on_tcp_connect sees `conn`,
 * `endpoint`, `time`, `vars` and `secrets`; on_http_request adds `req`; on_http_response adds `res`), with
 * the functions policies may call. Expressions are parsed and type-checked once, when the policy
 * is compiled; evaluating them then skips both.
 */

/** Parse limits: what a single expression may be. Errors name the limit that was hit. */
export const EXPRESSION_LIMITS = {
  /** Characters of source text. */
  maxLength: 4096,
  /** Nesting of calls, member accesses, indexes and literals. */
  maxDepth: 32,
  maxAstNodes: 1024,
  maxListElements: 256,
  maxMapEntries: 256,
  maxCallArguments: 16,
  /**
   * Nesting of comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`, `cel.bind`): each
   * level multiplies the work, so three levels over modest lists could already stall a request.
   */
  maxComprehensionNesting: 2,
} as const;

/** A compiled expression: evaluate it against an activation; it throws when evaluation fails. */
export interface CompiledExpression {
  readonly source: string;
  /** The secrets it reads (`secrets.get` calls, always with literal names). */
  readonly secrets: readonly SecretRef[];
  /** The whole expression is one `secrets.get` call: its value is a secret, whole. */
  readonly bareSecret: boolean;
  evaluate(activation: Activation): unknown;
}

const NO_SECRET_REFS: readonly SecretRef[] = Object.freeze([]);

/**
 * Why an expression was refused at compile time; the caller adds where it was written. A 400
 * with `ERR_NGROK_2200`; `cause` is the CEL library's or regex engine's error, when it reports one.
 */
export class ExpressionError extends BurrowError {
  declare readonly code: ErrorCode;

  constructor(message: string, options?: { cause?: unknown }) {
    super(CODES.policyInvalidExpression, 400, message, {}, options);
  }
}

// The functions that read the request or response (getReqHeader, ...) take no such argument, so
// they read the activation being evaluated. Evaluation is synchronous (no function here is
// async), so exactly one activation is current at any time.
let current: Activation | undefined;

function currentReq(): ReqVars {
  if (!current?.req) throw new Error('no request is being evaluated');
  return current.req;
}

function currentRes(): ResVars {
  if (!current?.res) throw new Error('no response is being evaluated');
  return current.res;
}

function cidrOf(text: string): Cidr {
  const parsed = parseCidrCached(text);
  if ('problem' in parsed)
    throw new Error(`${quote(text)} is not a CIDR block (${parsed.problem})`);
  return parsed;
}

/**
 * Whether `ip` lies in `cidr`; a bare address counts as a single-host block.
 * @example inCidrRange('10.1.2.3', '10.0.0.0/8') // true
 */
export function inCidrRange(ip: string, cidr: string): boolean {
  const addr = parseIp(ip);
  if (!addr) return false;
  if (cidr.includes('/')) return ipInCidr(addr, cidrOf(cidr));
  // A bare address is compared as parsed; a zone (fe80::1%eth0) names no host, as in a block.
  const host = cidr.includes('%') ? undefined : parseIp(cidr);
  if (!host) {
    const block = `${cidr}/${addr.family === 4 ? 32 : 128}`;
    throw new Error(`${quote(block)} is not a CIDR block (invalid)`);
  }
  return host.family === addr.family && host.value === addr.value;
}

const MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter', 'bind']);

/** Functions that exist only in some phases, for the hint when one is used elsewhere. */
const PHASE_FUNCTIONS: Record<string, PolicyPhase[]> = {
  getReqHeader: ['on_http_request', 'on_http_response'],
  hasReqHeader: ['on_http_request', 'on_http_response'],
  getQueryParam: ['on_http_request', 'on_http_response'],
  hasQueryParam: ['on_http_request', 'on_http_response'],
  getReqCookie: ['on_http_request', 'on_http_response'],
  hasReqCookie: ['on_http_request', 'on_http_response'],
  getResHeader: ['on_http_response'],
  hasResHeader: ['on_http_response'],
};
const PHASE_VARIABLES: Record<string, PolicyPhase[]> = {
  req: ['on_http_request', 'on_http_response'],
  res: ['on_http_response'],
};

/**
 * Where an expression is written: a rule or config value (`phase`), or http-request's
 * `retry_condition` (`retry`), which also sees `attempts` and `last_attempt`.
 */
export type ExpressionScope = 'phase' | 'retry';

function buildEnvironment(phase: PolicyPhase, scope: ExpressionScope): Environment {
  const { maxDepth, maxAstNodes, maxListElements, maxMapEntries, maxCallArguments } =
    EXPRESSION_LIMITS;
  const env = new Environment({
    homogeneousAggregateLiterals: false,
    limits: { maxDepth, maxAstNodes, maxListElements, maxMapEntries, maxCallArguments },
  });
  for (const t of CEL_TYPES) env.registerType(t.name, { ctor: t.ctor, fields: t.fields });
  // ngrok types these as strings that also have fields (`req.url.path`, `req.content_type.raw`).
  registerTextType(env, 'Url');
  registerTextType(env, 'ContentType');
  registerTextType(env, 'UserAgent');
  registerMacros(env);
  env
    .registerVariable('conn', 'Conn')
    .registerVariable('endpoint', 'Endpoint')
    .registerVariable('time', 'Time')
    .registerVariable('vars', 'map<string, dyn>')
    .registerVariable('actions', 'map<string, dyn>')
    .registerVariable('secrets', 'Secrets')
    .registerFunction(
      'Secrets.get(string, string): Secret',
      (secrets: SecretsVars, vault: string, name: string) => secrets.get(vault, name),
    )
    // Registering `Secret == string` covers `string == Secret` and both `!=` too.
    .registerOperator('Secret == string', secretEquals)
    .registerOperator('Secret == Secret', (a: SecretText, b: SecretText) => secretEquals(a, b))
    .registerFunction(`string.${RE2_MATCHES}(string): bool`, (s: string, re: string) =>
      compileRegex(re).test(s),
    )
    .registerFunction('matches(string, string): bool', (s: string, re: string) =>
      compileRegex(re).test(s),
    )
    .registerFunction('inCidrRange(string, string): bool', inCidrRange)
    .registerFunction('inCidrRanges(string, list<string>): bool', (ip: string, cidrs: string[]) =>
      cidrs.some((c) => inCidrRange(ip, c)),
    );
  if (phase !== 'on_tcp_connect') {
    env
      .registerVariable('req', 'Request')
      .registerFunction('getReqHeader(string): list<string>', (n: string) => currentReq().header(n))
      .registerFunction(
        'hasReqHeader(string): bool',
        (n: string) => currentReq().header(n).length > 0,
      )
      .registerFunction(
        'getQueryParam(string): list<string>',
        (n: string) => currentReq().url.query_params.get(n) ?? [],
      )
      .registerFunction('hasQueryParam(string): bool', (n: string) =>
        currentReq().url.query_params.has(n),
      )
      .registerFunction('getReqCookie(string): Cookie', (n: string) => {
        const cookie = currentReq().cookies.get(n)?.[0];
        if (!cookie) throw new Error(`the request has no cookie ${quote(n)}`);
        return cookie;
      })
      .registerFunction('hasReqCookie(string): bool', (n: string) => currentReq().cookies.has(n));
  }
  if (scope === 'retry') {
    // ngrok's retry variables: attempts so far, and the last one's req, res (if any) and error.
    env.registerVariable('attempts', 'int').registerVariable('last_attempt', 'map<string, dyn>');
  }
  if (phase === 'on_http_response') {
    env
      .registerVariable('res', 'Response')
      .registerFunction('getResHeader(string): list<string>', (n: string) => currentRes().header(n))
      .registerFunction(
        'hasResHeader(string): bool',
        (n: string) => currentRes().header(n).length > 0,
      );
  }
  return env;
}

const environments = new Map<string, Environment>();

function environmentFor(phase: PolicyPhase, scope: ExpressionScope): Environment {
  const key = `${phase}/${scope}`;
  let env = environments.get(key);
  if (!env) environments.set(key, (env = buildEnvironment(phase, scope)));
  return env;
}

/** More than maxDepth prefix operators in a row (whitespace between them allowed). */
const UNARY_RUN = new RegExp(`[!-](?:\\s*[!-]){${EXPRESSION_LIMITS.maxDepth},}`);

/**
 * The nodes directly below `node` (its args, looking through lists), or undefined for a value
 * that is no node. Everything after the parser (the checker, evaluation, `inspect`) recurses over
 * the tree, so its depth is measured first with document-limits' iterative walk.
 */
function astChildren(node: unknown): ASTNode[] | undefined {
  if (!isNode(node)) return undefined;
  const out: ASTNode[] = [];
  const pending: unknown[] = [node.args];
  while (pending.length > 0) {
    const v = pending.pop();
    if (Array.isArray(v)) pending.push(...(v as unknown[]));
    else if (isNode(v)) out.push(v);
  }
  return out;
}

/**
 * Walk the parsed tree once: route `matches` to re2js, check literal regexes and CIDRs now rather
 * than on the first request, and bound comprehension nesting.
 */
function inspect(node: unknown, nesting: number): void {
  if (Array.isArray(node)) {
    for (const child of node) inspect(child, nesting);
    return;
  }
  if (!isNode(node)) return;
  let inner = nesting;
  if (node.op === '.') routeClientIpInfo(node);
  if (node.op === 'rcall' || node.op === 'call') {
    const args = node.args as unknown[];
    const name = args[0] as string;
    const params = (node.op === 'rcall' ? args[2] : args[1]) as unknown[];
    if (node.op === 'rcall' && name === 'matches' && params.length === 1) args[0] = RE2_MATCHES;
    if (name === 'matches' || name === RE2_MATCHES) literalCheck(params.at(-1), 'regex');
    if (name === 'inCidrRange') literalCheck(params[1], 'cidr');
    if (MACROS.has(name)) {
      inner = nesting + 1;
      if (inner > EXPRESSION_LIMITS.maxComprehensionNesting) {
        throw new ExpressionError(
          `comprehensions (all, exists, exists_one, map, filter, cel.bind) are nested ${inner} deep at column ${node.start + 1}; at most ${EXPRESSION_LIMITS.maxComprehensionNesting} levels are allowed`,
        );
      }
    }
  }
  inspect(node.args, inner);
}

/**
 * `conn.client_ip.geo` (and `.as`, `.categories`, `.is_on_blocklist`, ngrok's IP intelligence)
 * reads `conn.client_ip_info.geo`: `conn.client_ip` itself stays a string everywhere else.
 */
function routeClientIpInfo(node: ASTNode): void {
  const [target, field] = node.args as [unknown, unknown];
  if (typeof field !== 'string' || !CLIENT_IP_INFO_FIELDS.has(field) || !isNode(target)) return;
  if (target.op !== '.') return;
  const [conn, name] = target.args as [unknown, unknown];
  if ((name !== 'client_ip' && name !== 'ClientIP') || !isNode(conn)) return;
  if (conn.op !== 'id' || conn.args !== 'conn') return;
  (target.args as unknown[])[1] = 'client_ip_info';
}

function literalCheck(arg: unknown, kind: 'regex' | 'cidr'): void {
  if (!isNode(arg) || arg.op !== 'value' || typeof arg.args !== 'string') return;
  const text = arg.args;
  try {
    if (kind === 'regex') compileRegex(text);
    else cidrOf(text.includes('/') ? text : `${text}/${text.includes(':') ? 128 : 32}`);
  } catch (err) {
    const what = kind === 'regex' ? 'regular expression (RE2 syntax)' : 'CIDR block';
    throw new ExpressionError(`invalid ${what} ${quote(text, '"')}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function describe(error: unknown, phase: PolicyPhase, source: string): string {
  const e = error as { summary?: string; message?: string; range?: { start: number } };
  let text = (e.summary ?? e.message ?? String(error)).split('\n')[0]!;
  text = text.replaceAll(RE2_MATCHES, 'matches');
  if (e.range) text += ` (column ${e.range.start + 1})`;
  const unknownVar = /^Unknown variable: (\w+)/.exec(text)?.[1];
  if (unknownVar !== undefined) {
    const phases = PHASE_VARIABLES[unknownVar];
    text += phases
      ? `; ${unknownVar} is only available in ${phases.join(' and ')}, not in ${phase}`
      : `; the variables are conn, endpoint, time, vars, actions and secrets, plus req (HTTP phases) and res (on_http_response), and the macros ${MACRO_NAMESPACES.join(', ')}`;
  } else if (/^No such key: /.test(text)) {
    text += '; see docs/traffic-policy.md for the fields of conn, req, res, endpoint and time';
  } else {
    const fn = Object.keys(PHASE_FUNCTIONS).find((f) => source.includes(`${f}(`));
    const phases = fn === undefined ? undefined : PHASE_FUNCTIONS[fn];
    if (fn !== undefined && phases && !phases.includes(phase) && /overload/.test(text)) {
      text += `; ${fn}() is only available in ${phases.join(' and ')}`;
    }
  }
  return text;
}

/**
 * Compile `source` for `phase`. A `condition` must give a bool (rule expressions); a `value` may
 * give anything (interpolations, rate-limit bucket keys). Throws {@link ExpressionError}.
 * @example compileExpression("conn.client_ip == '192.0.2.1'", 'on_tcp_connect', 'condition')
 */
export function compileExpression(
  source: string,
  phase: PolicyPhase,
  purpose: 'condition' | 'value',
  scope: ExpressionScope = 'phase',
): CompiledExpression {
  if (source.length > EXPRESSION_LIMITS.maxLength) {
    throw new ExpressionError(
      `the expression is ${source.length} characters long; the limit is ${EXPRESSION_LIMITS.maxLength}`,
    );
  }
  // The parser recurses once per prefix operator before any depth limit of its own applies.
  if (UNARY_RUN.test(source)) {
    throw new ExpressionError(
      `the expression has a run of more than ${EXPRESSION_LIMITS.maxDepth} ! or - operators`,
    );
  }
  const env = environmentFor(phase, scope);
  let parsed: ReturnType<Environment['parse']>;
  let checked: TypeCheckResult;
  try {
    parsed = env.parse(source);
  } catch (err) {
    throw new ExpressionError(describe(err, phase, source), { cause: err });
  }
  const depth = deepest([parsed.ast], astChildren, EXPRESSION_LIMITS.maxDepth);
  if (depth > EXPRESSION_LIMITS.maxDepth) {
    throw new ExpressionError(
      `the expression nests ${depth} levels deep; the limit is ${EXPRESSION_LIMITS.maxDepth}`,
    );
  }
  inspect(parsed.ast, 0);
  // Before type checking, whose "no overload for size(Secret)" would say less than this does.
  const secrets = source.includes('secrets') ? scanSecretUses(parsed.ast) : undefined;
  if (secrets && 'problem' in secrets) throw new ExpressionError(secrets.problem);
  try {
    checked = parsed.check();
  } catch (err) {
    throw new ExpressionError(describe(err, phase, source), { cause: err });
  }
  if (!checked.valid) {
    throw new ExpressionError(describe(checked.error, phase, source), { cause: checked.error });
  }
  if (purpose === 'condition' && checked.type !== 'bool' && checked.type !== 'dyn') {
    throw new ExpressionError(
      `a rule expression must give a bool (true or false), but this one gives ${checked.type}; compare it with something, e.g. ${shorten(source)} == '...'`,
    );
  }
  const direct = directReader(parsed.ast, checked.type);
  return {
    source,
    secrets: secrets && secrets.refs.length > 0 ? secrets.refs : NO_SECRET_REFS,
    bareSecret: secrets?.bare ?? false,
    evaluate(activation: Activation): unknown {
      const value = direct?.(activation);
      if (value !== undefined) return value;
      const previous = current;
      current = activation;
      try {
        return parsed(activation);
      } finally {
        current = previous;
      }
    },
  };
}
