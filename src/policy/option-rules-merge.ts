/**
 * The endpoint options' rules (endpoint-options.ts) merged with the endpoint's own traffic policy
 * into the one document the endpoint is bound with, the options' rules first. Every option's rule,
 * the own policy and the whole are checked with the policy engine before anything connects, so a
 * bad option fails with a message that starts with the option.
 */
import { BurrowError } from '../core/errors.js';
import { EndpointOptionError, type EndpointProto, type OptionRules } from './endpoint-options.js';
import {
  parsePolicyDocument,
  POLICY_PHASES,
  toPhases,
  type PolicyPhase,
  type PolicyProtocol,
  type PolicyRule,
} from './parse.js';
import { validatePolicy } from './validate.js';

/** How many rules `rules` holds, over every phase. */
function ruleCount(rules: OptionRules): number {
  return POLICY_PHASES.reduce((count, phase) => count + rules[phase].length, 0);
}

/** The policy protocol an endpoint of `proto` is checked for. */
function policyProtocol(proto: EndpointProto): PolicyProtocol {
  return proto === 'http' ? 'https' : proto;
}

/**
 * The options' rules followed by the rules of policy `text` (either form), as one document in the
 * phase form; phases without rules are left out.
 * @example mergePolicy(optionRules({ cidrDeny: ['10.0.0.0/8'] }, 'http', naming), 'on_http_request: [{actions: [{type: deny}]}]', 'https', '--policy-file p.yml')
 *   // { on_http_request: [{ name: '--cidr-deny', … }, { expressions: [], actions: [{ type: 'deny', config: null }] }] }
 */
export function mergePolicy(
  rules: OptionRules,
  text: string | undefined,
  protocol: PolicyProtocol,
  field: string,
): Partial<OptionRules> {
  const own = text === undefined ? undefined : toPhases(parsePolicyDocument(text, field), protocol);
  const doc: Partial<OptionRules> = {};
  for (const phase of POLICY_PHASES) {
    const mine = (own?.[phase] ?? []).map(({ name, expressions, actions }) => ({
      ...(name === undefined ? {} : { name }),
      expressions,
      actions,
    }));
    const all = [...rules[phase], ...mine];
    if (all.length > 0) doc[phase] = all;
  }
  return doc;
}

/** Re-throw a policy engine error about an option's rule as one that starts with the option. */
function checkRule(phase: PolicyPhase, r: PolicyRule, protocol: PolicyProtocol): void {
  const option = r.name ?? 'options';
  try {
    validatePolicy(JSON.stringify({ [phase]: [r] }), protocol, option);
  } catch (err) {
    const message = (err as Error).message;
    throw new EndpointOptionError(
      option,
      message.startsWith(`${option}: `) ? message.slice(option.length + 2) : message,
      err instanceof BurrowError ? err.code : undefined,
      { cause: err },
    );
  }
}

/**
 * The traffic policy text to bind an endpoint of `proto` with: the own policy's text unchanged
 * when the options add no rule, else one JSON document with the options' rules first, then the
 * own policy's. Each option's rule, the own policy (named `own.field`) and the whole (named
 * `wholeField`) are checked with the policy engine first, so a bad option fails before anything
 * connects, with a message that starts with the option; the engine's own errors (a BurrowError
 * with its ERR_NGROK_22xx code) are thrown for the own policy and the whole.
 * @example trafficPolicyWithRules(optionRules({ basicAuth: ['ops:correct-horse'] }, 'http', naming), 'http', undefined, 'the options')
 *   // '{"on_http_request":[{"name":"--basic-auth","expressions":[],"actions":[{"type":"basic-auth","config":{"credentials":["ops:correct-horse"]}}]}]}'
 */
export function trafficPolicyWithRules(
  rules: OptionRules,
  proto: EndpointProto,
  own: { field: string; text: string } | undefined,
  wholeField: string,
): string | undefined {
  if (ruleCount(rules) === 0) return own?.text;
  const protocol = policyProtocol(proto);
  for (const phase of POLICY_PHASES) {
    for (const r of rules[phase]) checkRule(phase, r, protocol);
  }
  if (own) validatePolicy(own.text, protocol, own.field);
  const merged = JSON.stringify(mergePolicy(rules, own?.text, protocol, own?.field ?? wholeField));
  validatePolicy(merged, protocol, wholeField);
  return merged;
}
