/**
 * The traffic policy a bind carries: `Opts.TrafficPolicy` (JSON or YAML text, what current SDKs
 * send) or the older structured `Opts.Policy` (ngrok-go before 1.10, and a legacy object some
 * SDKs send in TrafficPolicy), turned into one policy text and checked for the endpoint's
 * protocol before anything is allocated.
 */
import { ValidationError } from '../../core/errors.js';
import {
  compilePolicy,
  parsePolicyDocument,
  POLICY_PHASES_OF_DOCUMENT,
  toPhases,
  type CompiledPolicy,
  type PolicyProtocol,
} from '../../policy/index.js';
import type { BindOpts } from '../../protocol/index.js';
import { AgentError, refusals } from './agent-errors.js';
import { isSet } from './bind-options.js';
import type { OptionRules } from './bind-option-rules.js';

/**
 * A bind's policy, validated: the text the tunnel keeps (and the API shows: the agent's own
 * policy, '' when it sent none) and the compiled form that runs, which puts the rules of the
 * bind's options (`options`) before the agent's policy.
 */
export interface BindTrafficPolicy {
  text: string;
  policy: CompiledPolicy;
  /** The rules the bind's options added; kept so that PatchTunnelState keeps them too. */
  options?: OptionRules | undefined;
}

/**
 * The options' rules followed by the rules of policy `text` (either form), as one policy text in
 * the phase form. `text` must already have been checked.
 * @example mergedPolicyText(rules, 'on_http_request: [{actions: [{type: deny}]}]', 'https')
 */
export function mergedPolicyText(
  options: OptionRules,
  text: string | undefined,
  protocol: PolicyProtocol,
): string {
  const own =
    text === undefined ? undefined : toPhases(parsePolicyDocument(text, 'TrafficPolicy'), protocol);
  const doc: Record<string, unknown> = {};
  for (const phase of POLICY_PHASES_OF_DOCUMENT) {
    const mine = (own?.[phase] ?? []).map(({ name, expressions, actions }) => ({
      ...(name === undefined ? {} : { name }),
      expressions,
      actions,
    }));
    doc[phase] = [...options[phase], ...mine];
  }
  return JSON.stringify(doc);
}

type Mapping = Record<string, unknown>;

function isMapping(value: unknown): value is Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `{Inbound: …}` → `{inbound: …}`: Go marshals exported field names as they are spelled. */
function lowerKeys(value: Mapping): Mapping {
  const out: Mapping = {};
  for (const [key, v] of Object.entries(value)) out[key.toLowerCase()] = v;
  return out;
}

/**
 * An action's config as the older wire form carries it: an object, JSON text, or (Go marshals a
 * `[]byte` so) base64 of JSON text. Anything else is left for the validator to name.
 */
function legacyConfig(config: unknown): unknown {
  if (typeof config !== 'string') return config;
  const text = config.trim();
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Not JSON: maybe base64 of JSON.
  }
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(text)) {
    try {
      return JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as unknown;
    } catch {
      // Neither: the validator says the config must be a mapping.
    }
  }
  return config;
}

function legacyRule(rule: unknown): unknown {
  if (!isMapping(rule)) return rule;
  const out = lowerKeys(rule);
  if (Array.isArray(out.actions)) {
    out.actions = out.actions.map((action: unknown) => {
      if (!isMapping(action)) return action;
      const a = lowerKeys(action);
      if ('config' in a) {
        const config = legacyConfig(a.config);
        if (config === null || config === undefined) delete a.config;
        else a.config = config;
      }
      return a;
    });
  }
  // Go omits empty lists, and sends null for them without omitempty.
  if (out.expressions === null) delete out.expressions;
  if (out.name === '' || out.name === null) delete out.name;
  return out;
}

/**
 * A structured policy object (`{Inbound, Outbound}` or `{inbound, outbound}` with rules of `Name`,
 * `Expressions`, `Actions: [{Type, Config}]`) as JSON policy text.
 * @example legacyPolicyText({ Inbound: [{ Name: 'r', Actions: [{ Type: 'deny' }] }] })
 *   // '{"inbound":[{"name":"r","actions":[{"type":"deny"}]}]}'
 */
export function legacyPolicyText(value: unknown): string {
  if (!isMapping(value)) return JSON.stringify(value);
  const doc = lowerKeys(value);
  for (const [list, rules] of Object.entries(doc)) {
    if (rules === null) delete doc[list];
    else if (Array.isArray(rules)) doc[list] = rules.map(legacyRule);
  }
  return JSON.stringify(doc);
}

/**
 * The policy text of a bind's options and the option it came from, or undefined when neither
 * TrafficPolicy nor Policy is set (SDKs send both keys, empty, when there is no policy).
 * @example bindPolicyText({ TrafficPolicy: 'on_http_request: []' }) // { text: 'on_http_request: []', field: 'TrafficPolicy' }
 */
export function bindPolicyText(
  opts: BindOpts | undefined,
): { text: string; field: 'TrafficPolicy' | 'Policy' } | undefined {
  const traffic = opts?.TrafficPolicy;
  const legacy = opts?.Policy;
  const hasTraffic = isSet(traffic);
  if (hasTraffic && isSet(legacy)) {
    throw refusals.badRequest(
      'both Opts.TrafficPolicy and Opts.Policy are set; send the policy once, as TrafficPolicy',
    );
  }
  if (hasTraffic) {
    return {
      text: typeof traffic === 'string' ? traffic : legacyPolicyText(traffic),
      field: 'TrafficPolicy',
    };
  }
  if (isSet(legacy)) {
    return {
      text: typeof legacy === 'string' ? legacy : legacyPolicyText(legacy),
      field: 'Policy',
    };
  }
  return undefined;
}

/**
 * Compile `text` for an endpoint of `protocol`, turning the validator's 400 into the bind
 * refusal the agent shows: the same message (naming the option, phase, rule and action) and the
 * policy's `ERR_NGROK_22xx` code.
 * @example compileBindPolicy('on_tcp_connect: [{actions: [{type: deny}]}]', 'tcp', 'TrafficPolicy')
 */
export function compileBindPolicy(
  text: string,
  protocol: PolicyProtocol,
  field: string,
): CompiledPolicy {
  try {
    return compilePolicy(text, { protocol, field });
  } catch (err) {
    if (err instanceof ValidationError) {
      throw new AgentError(err.code, `The traffic policy is not valid: ${err.message}`);
    }
    throw err;
  }
}
