import { quote } from '../core/quote.js';
import { CODES, ValidationError } from '../core/errors.js';
import { ACTIONS, UNSUPPORTED_ACTIONS, type ActionSpec } from './actions/index.js';
import {
  isHttpProtocol,
  POLICY_PHASES,
  type PhasedRule,
  type PolicyPhase,
  type PolicyPhases,
  type PolicyProtocol,
} from './parse.js';

/**
 * The save-time checks about where things are: phases a protocol runs (2230), action types
 * (2201), actions in the wrong phase (2202) or protocol (2205), and actions that can never run
 * (2207). Messages name the phase, the rule (index and name) and the action (index and type),
 * then say what to do.
 */

/**
 * The phases an endpoint of `protocol` runs.
 * @example phasesOf('tls') // ['on_tcp_connect']
 */
export function phasesOf(protocol: PolicyProtocol): readonly PolicyPhase[] {
  return isHttpProtocol(protocol) ? POLICY_PHASES : ['on_tcp_connect'];
}

/**
 * How messages name a rule: `phase on_tcp_connect (from inbound), rule 0 ("AllowTLS1.3")`.
 * @example ruleWhere('on_http_request', rule) // 'phase on_http_request, rule 2 ("Block bots")'
 */
export function ruleWhere(phase: PolicyPhase, rule: PhasedRule): string {
  const from = rule.source.list === phase ? '' : ` (from ${rule.source.list})`;
  const name = rule.name ? ` (${quote(rule.name, '"')})` : '';
  return `phase ${phase}${from}, rule ${rule.source.index}${name}`;
}

/** How messages name an action: `<rule>, action 1 (deny)`. */
export function actionWhere(rule: string, index: number, type: string): string {
  return `${rule}, action ${index} (${type})`;
}

/** Refuse rules in phases `protocol` does not run (2230). */
export function checkPhases(phases: PolicyPhases, protocol: PolicyProtocol, field: string): void {
  const runs = phasesOf(protocol);
  for (const phase of POLICY_PHASES) {
    const rule = phases[phase][0];
    if (!rule || runs.includes(phase)) continue;
    const legacy = rule.source.list !== phase;
    const fix = legacy
      ? `remove the ${rule.source.list} rules (${rule.source.list} is ${phase})`
      : `move these rules to ${runs.join(', ')} or remove them`;
    throw new ValidationError(
      CODES.policyPhase,
      field,
      `Invalid Traffic Policy phase ${phase} for protocol ${protocol}: ${ruleWhere(phase, rule)} cannot run, because a ${protocol.toUpperCase()} endpoint only runs ${runs.join(', ')}; ${fix}`,
    );
  }
}

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

/** The spec of action `type`, or a 2201 naming the closest supported type. */
export function resolveAction(type: string, where: string, field: string): ActionSpec {
  const spec = ACTIONS.get(type);
  if (spec) return spec;
  const supported = [...ACTIONS.keys()].sort();
  let problem: string;
  if (UNSUPPORTED_ACTIONS.includes(type)) {
    problem = `action type '${type}' is not supported by Burrow`;
  } else {
    const lower = type.toLowerCase().replaceAll('_', '-');
    const best = supported
      .map((t) => [t, distance(lower, t)] as const)
      .sort((x, y) => x[1] - y[1])[0]!;
    // ngrok's docs file openid-connect under /actions/oidc; the type is openid-connect.
    const hint = lower === 'oidc' ? 'openid-connect' : best[1] <= 3 ? best[0] : undefined;
    const guess = hint !== undefined ? `; did you mean '${hint}'?` : '';
    problem = `unknown action type '${type}'${guess}`;
  }
  throw new ValidationError(
    CODES.policyInvalidAction,
    field,
    `${where}: ${problem}${problem.endsWith('?') ? ' ' : '. '}The supported types are: ${supported.join(', ')}.`,
  );
}

/** Refuse an action in a phase it does not run in (2202), or on a protocol it cannot serve (2205). */
export function checkPlacement(
  spec: ActionSpec,
  phase: PolicyPhase,
  protocol: PolicyProtocol,
  where: string,
  field: string,
): void {
  const runs = phasesOf(protocol);
  const usable = (): string[] =>
    [...ACTIONS.values()]
      .filter((a) => a.phases.some((p) => runs.includes(p)))
      .filter((a) => !a.protocols || a.protocols.includes(protocol))
      .map((a) => a.type)
      .sort();
  if (spec.protocols && !spec.protocols.includes(protocol)) {
    const on = spec.protocols.map((p) => p.toUpperCase()).join(', ');
    throw new ValidationError(
      CODES.policyActionProtocol,
      field,
      `${where}: action type '${spec.type}' is not supported for protocol ${protocol}: it works on ${on} endpoints only. On ${protocol.toUpperCase()} endpoints use ${usable().join(', ')}.`,
    );
  }
  if (spec.phases.includes(phase)) return;
  if (!spec.phases.some((p) => runs.includes(p))) {
    throw new ValidationError(
      CODES.policyActionProtocol,
      field,
      `${where}: action type '${spec.type}' is not supported for protocol ${protocol}: it works on HTTP only (${spec.phases.join(', ')}). On ${protocol.toUpperCase()} endpoints use ${usable().join(', ')}.`,
    );
  }
  throw new ValidationError(
    CODES.policyActionPhase,
    field,
    `${where}: Action type ${spec.type} is not supported for ${phase}; it runs in ${spec.phases.filter((p) => runs.includes(p)).join(', ')}. Move it to a rule there.`,
  );
}

/** Refuse action `next` placed after one that always ends the phase (2207). */
export function refuseUnreachable(
  rule: string,
  terminating: { index: number; type: string },
  next: { index: number; type: string },
  field: string,
): never {
  throw new ValidationError(
    CODES.policyUnreachableAction,
    field,
    `${actionWhere(rule, next.index, next.type)} can never run: action ${terminating.index} (${terminating.type}) before it always ends the phase. Move it before ${terminating.type}, or into another rule.`,
  );
}
