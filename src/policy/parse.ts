import { quote } from '../core/quote.js';
import { parseDocument } from 'yaml';
import { CODES, ValidationError } from '../core/errors.js';
import {
  POLICY_DOCUMENT_LIMITS,
  policyTextProblem,
  policyValueProblem,
} from './document-limits.js';

/**
 * Traffic policy documents: parsing and shape checks. A document is JSON or YAML in one of two
 * forms: the older `inbound`/`outbound` lists, or the phase lists `on_tcp_connect`,
 * `on_http_request` and `on_http_response`. This module only checks the shape (rules with
 * expressions and actions); what expressions mean and which action types and configs are valid is
 * checked by the validator built on top of it, which names rules with {@link ruleLabel}.
 */

/** The phase lists of the newer form, in the order traffic meets them. */
export const POLICY_PHASES = ['on_tcp_connect', 'on_http_request', 'on_http_response'] as const;
/** The lists of the older form. */
export const LEGACY_DIRECTIONS = ['inbound', 'outbound'] as const;

export type PolicyPhase = (typeof POLICY_PHASES)[number];
export type LegacyDirection = (typeof LEGACY_DIRECTIONS)[number];
/** Any top-level list name a document may use. */
export type PolicyListName = PolicyPhase | LegacyDirection;
/** The protocols a policy can be attached to; they decide where `inbound` rules run. */
export type PolicyProtocol = 'http' | 'https' | 'tcp' | 'tls';

/**
 * Whether `protocol` carries HTTP (and so runs on_http_request and on_http_response).
 * @example isHttpProtocol('https') // true
 */
export function isHttpProtocol(protocol: PolicyProtocol): boolean {
  return protocol === 'http' || protocol === 'https';
}

/** One action of a rule. `config` is null when the document gave none. */
export interface PolicyAction {
  type: string;
  config: Record<string, unknown> | null;
}

/** One rule: its expressions are ANDed (none matches always); its actions run in order. */
export interface PolicyRule {
  name?: string;
  expressions: string[];
  /**
   * What a failing expression (evaluation error at run time) does to this rule: `match` runs its
   * actions, `skip` skips the rule. Default: `match` when an action guards (deny, auth,
   * restrict-ips…), else `skip` (see compile.ts expressionFailureDefault).
   */
  on_expression_error?: ExpressionErrorChoice;
  actions: PolicyAction[];
}

/** A document in the older form. A list the document left out (or gave as null) is empty. */
export interface LegacyPolicyDocument {
  format: 'legacy';
  inbound: PolicyRule[];
  outbound: PolicyRule[];
}

/** A document in the phase form. A list the document left out (or gave as null) is empty. */
export interface PhasesPolicyDocument {
  format: 'phases';
  on_tcp_connect: PolicyRule[];
  on_http_request: PolicyRule[];
  on_http_response: PolicyRule[];
}

export type PolicyDocument = LegacyPolicyDocument | PhasesPolicyDocument;

/** A rule placed in a phase, remembering where the document wrote it (for error messages). */
export interface PhasedRule extends PolicyRule {
  source: { list: PolicyListName; index: number };
}

export type PolicyPhases = Record<PolicyPhase, PhasedRule[]>;

/** What a rule does when one of its expressions fails to evaluate (a Burrow rule key). */
export type ExpressionErrorChoice = 'match' | 'skip';
const EXPRESSION_ERROR_CHOICES: readonly ExpressionErrorChoice[] = ['match', 'skip'];

const RULE_KEYS = ['name', 'expressions', 'actions', 'on_expression_error'];
const ACTION_KEYS = ['type', 'config'];

type Mapping = Record<string, unknown>;

function isMapping(value: unknown): value is Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * How errors describe a value that has the wrong shape.
 * @example describeValue([1]) // 'a list'
 */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  const shown = JSON.stringify(value);
  // Messages quote the value to help find it, not to echo a whole document back.
  return `a ${typeof value} (${shown.length > 60 ? `${shown.slice(0, 57)}...` : shown})`;
}

/**
 * How errors name a rule: its list and index, and its name when it has one.
 * @example ruleLabel('on_http_request', 1, { name: 'Block bots' }) // 'on_http_request[1] ("Block bots")'
 */
export function ruleLabel(list: PolicyListName, index: number, rule?: { name?: unknown }): string {
  const name = rule?.name;
  return typeof name === 'string' && name !== ''
    ? `${list}[${index}] (${quote(name, '"')})`
    : `${list}[${index}]`;
}

/** Text to a plain value, or a 2236 carrying the parser's line and column. */
function parseText(text: string, field: string): unknown {
  if (text.trim() === '') {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `the traffic policy is empty; give a JSON or YAML mapping with ${formsHint()}`,
    );
  }
  const outOfBounds = policyTextProblem(text);
  if (outOfBounds) throw new ValidationError(CODES.policyUnparseable, field, outOfBounds);
  // YAML 1.2 is a superset of JSON, so one parser reads both and reports positions for both. It
  // also refuses duplicate keys, which JSON.parse would silently collapse.
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  const error = doc.errors[0];
  if (error) {
    const reason = error.message.split('\n')[0] ?? error.message;
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `cannot parse the traffic policy as JSON or YAML: ${reason}`,
    );
  }
  try {
    // toJS refuses documents whose aliases expand excessively (maxAliasCount), so a small YAML
    // text cannot balloon into a huge value.
    return flattenStrings(doc.toJS());
  } catch (err) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `cannot parse the traffic policy as JSON or YAML: ${(err as Error).message}`,
    );
  }
}

/**
 * The value with its long strings made flat. The YAML parser builds scalars piece by piece, and V8
 * keeps such a string as a tree of its pieces (about 30 bytes per character): a compiled policy
 * holding its strings would otherwise weigh some 30 times its text. JSON.parse makes flat strings
 * and keeps every code unit (lone surrogates included).
 */
function flattenStrings(value: unknown): unknown {
  if (typeof value === 'string') {
    return value.length < 64 ? value : (JSON.parse(JSON.stringify(value)) as string);
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = flattenStrings(value[i]);
  } else if (isMapping(value)) {
    for (const [k, v] of Object.entries(value)) value[k] = flattenStrings(v);
  }
  return value;
}

function formsHint(): string {
  return `the lists ${POLICY_PHASES.join(', ')} (or the older ${LEGACY_DIRECTIONS.join(', ')})`;
}

/** Config values must survive a JSON round trip: YAML can say `.inf` and `.nan`, JSON cannot. */
function findNonJson(value: unknown, path: string): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = findNonJson(value[i], `${path}[${i}]`);
      if (bad) return bad;
    }
  } else if (isMapping(value)) {
    for (const [k, v] of Object.entries(value)) {
      const bad = findNonJson(v, `${path}.${k}`);
      if (bad) return bad;
    }
  }
  return undefined;
}

function parseAction(raw: unknown, where: string, field: string): PolicyAction {
  if (!isMapping(raw)) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${where} must be a mapping with a type and an optional config, not ${describeValue(raw)}`,
    );
  }
  for (const key of Object.keys(raw)) {
    if (!ACTION_KEYS.includes(key)) {
      throw new ValidationError(
        CODES.policyUnparseable,
        field,
        `${where}: unknown key '${key}'; an action has the keys ${ACTION_KEYS.join(', ')}`,
      );
    }
  }
  const { type, config } = raw;
  if (typeof type !== 'string' || type.trim() === '') {
    throw new ValidationError(
      CODES.policyInvalidAction,
      field,
      `${where}: type must be a non-empty string naming the action (e.g. "deny"), not ${describeValue(type)}`,
    );
  }
  if (config !== undefined && config !== null && !isMapping(config)) {
    throw new ValidationError(
      CODES.policyActionConfig,
      field,
      `${where} (${type}): config must be a mapping of the action's settings, not ${describeValue(config)}`,
    );
  }
  const nonJson = config ? findNonJson(config, 'config') : undefined;
  if (nonJson) {
    throw new ValidationError(
      CODES.policyActionConfig,
      field,
      `${where} (${type}): ${nonJson} must be a finite number`,
    );
  }
  return { type, config: config ?? null };
}

function parseRule(raw: unknown, list: PolicyListName, index: number, field: string): PolicyRule {
  const label = ruleLabel(list, index, isMapping(raw) ? raw : undefined);
  if (!isMapping(raw)) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${label} must be a rule: a mapping with name, expressions and actions, not ${describeValue(raw)}`,
    );
  }
  for (const key of Object.keys(raw)) {
    if (!RULE_KEYS.includes(key)) {
      throw new ValidationError(
        CODES.policyUnparseable,
        field,
        `${label}: unknown key '${key}'; a rule has the keys ${RULE_KEYS.join(', ')}`,
      );
    }
  }
  const { name, expressions, actions, on_expression_error: onError } = raw;
  if (
    onError !== undefined &&
    onError !== null &&
    !EXPRESSION_ERROR_CHOICES.includes(onError as ExpressionErrorChoice)
  ) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${label}: on_expression_error must be 'match' (run the actions when an expression fails at run time) or 'skip' (skip the rule), not ${describeValue(onError)}`,
    );
  }
  if (name !== undefined && name !== null && typeof name !== 'string') {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${label}: name must be a string, not ${describeValue(name)}`,
    );
  }
  const exprs: string[] = [];
  if (expressions !== undefined && expressions !== null) {
    if (!Array.isArray(expressions)) {
      throw new ValidationError(
        CODES.policyInvalidExpression,
        field,
        `${label}: expressions must be a list of CEL expressions (strings), not ${describeValue(expressions)}`,
      );
    }
    expressions.forEach((expr: unknown, i) => {
      if (typeof expr !== 'string' || expr.trim() === '') {
        throw new ValidationError(
          CODES.policyInvalidExpression,
          field,
          `${label}: expressions[${i}] must be a non-empty CEL expression string, not ${describeValue(expr)}`,
        );
      }
      exprs.push(expr);
    });
  }
  if (!Array.isArray(actions) || actions.length === 0) {
    throw new ValidationError(
      CODES.policyNoActions,
      field,
      `${label}: actions must be a non-empty list; a rule needs at least one action`,
    );
  }
  const rule: PolicyRule = {
    expressions: exprs,
    actions: actions.map((a: unknown, i) => parseAction(a, `${label}.actions[${i}]`, field)),
  };
  if (typeof name === 'string') rule.name = name;
  if (typeof onError === 'string') rule.on_expression_error = onError as ExpressionErrorChoice;
  return rule;
}

function parseList(raw: unknown, list: PolicyListName, field: string): PolicyRule[] {
  // A null list is what the API itself sends for an empty direction (`"outbound": null`).
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${list} must be a list of rules, not ${describeValue(raw)}`,
    );
  }
  if (raw.length > POLICY_DOCUMENT_LIMITS.maxRulesPerList) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `${list} has ${raw.length} rules; the limit is ${POLICY_DOCUMENT_LIMITS.maxRulesPerList} per list, so that no request waits on thousands of them`,
    );
  }
  return raw.map((rule: unknown, i) => parseRule(rule, list, i, field));
}

/**
 * Check an already-parsed policy value (for example a structured `policy` object in a JSON body)
 * and return it normalised. Throws like {@link parsePolicyDocument}.
 * @example parsePolicyValue({ inbound: [{ actions: [{ type: 'deny' }] }] }, 'policy')
 */
export function parsePolicyValue(value: unknown, field: string): PolicyDocument {
  const outOfBounds = policyValueProblem(value);
  if (outOfBounds) throw new ValidationError(CODES.policyUnparseable, field, outOfBounds);
  if (!isMapping(value)) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `the traffic policy must be a mapping with ${formsHint()}, not ${describeValue(value)}`,
    );
  }
  const keys = Object.keys(value);
  const legacy = keys.filter((k) => (LEGACY_DIRECTIONS as readonly string[]).includes(k));
  const phases = keys.filter((k) => (POLICY_PHASES as readonly string[]).includes(k));
  const unknown = keys.find((k) => !legacy.includes(k) && !phases.includes(k));
  if (unknown !== undefined) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `unknown top-level key '${unknown}'; a traffic policy has ${formsHint()}`,
    );
  }
  if (legacy.length > 0 && phases.length > 0) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `the traffic policy mixes the older lists (${legacy.join(', ')}) with phases (${phases.join(', ')}); use one form: inbound becomes on_tcp_connect (TCP, TLS) or on_http_request (HTTP), outbound becomes on_http_response`,
    );
  }
  if (legacy.length > 0) {
    return {
      format: 'legacy',
      inbound: parseList(value.inbound, 'inbound', field),
      outbound: parseList(value.outbound, 'outbound', field),
    };
  }
  return {
    format: 'phases',
    on_tcp_connect: parseList(value.on_tcp_connect, 'on_tcp_connect', field),
    on_http_request: parseList(value.on_http_request, 'on_http_request', field),
    on_http_response: parseList(value.on_http_response, 'on_http_response', field),
  };
}

/**
 * Parse a traffic policy document (JSON or YAML, either form) and check its shape. `field` is the
 * API field it came from; errors are {@link ValidationError}s naming it, the rule and the problem.
 * An empty mapping (`{}`) is a valid policy with no rules, in the phase form.
 * @example
 * const doc = parsePolicyDocument('on_http_request:\n  - actions: [{type: deny}]', 'traffic_policy.value');
 * doc.format // 'phases'
 */
export function parsePolicyDocument(text: string, field: string): PolicyDocument {
  return parsePolicyValue(parseText(text, field), field);
}

/**
 * The document's rules by phase for an endpoint of `protocol`: `inbound` runs on_http_request for
 * HTTP(S) and on_tcp_connect for TCP and TLS, `outbound` runs on_http_response. Whether the phases
 * suit the protocol is the validator's call (2230), so nothing is dropped here.
 * @example toPhases(parsePolicyDocument('{"inbound":[{"actions":[{"type":"deny"}]}]}', 'v'), 'tcp').on_tcp_connect.length // 1
 */
export function toPhases(doc: PolicyDocument, protocol: PolicyProtocol): PolicyPhases {
  const place = (rules: PolicyRule[], list: PolicyListName): PhasedRule[] =>
    rules.map((rule, index) => ({ ...rule, source: { list, index } }));
  if (doc.format === 'phases') {
    return {
      on_tcp_connect: place(doc.on_tcp_connect, 'on_tcp_connect'),
      on_http_request: place(doc.on_http_request, 'on_http_request'),
      on_http_response: place(doc.on_http_response, 'on_http_response'),
    };
  }
  const inbound = place(doc.inbound, 'inbound');
  const http = isHttpProtocol(protocol);
  return {
    on_tcp_connect: http ? [] : inbound,
    on_http_request: http ? inbound : [],
    on_http_response: place(doc.outbound, 'outbound'),
  };
}
