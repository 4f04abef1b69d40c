import type { PolicyAction, PolicyRule } from './parse.js';

/**
 * The rule builders of the endpoint options, shared by their front ends: the CLI flags and the
 * device agent's tunnel options (through endpoint-options.ts) and the SDKs' bind options
 * (src/edge/binds/bind-option-rules.ts). Each takes values its front end has already checked,
 * and the rule's name.
 */

export const rule = (
  name: string,
  actions: PolicyAction[],
  expressions: string[] = [],
): PolicyRule => ({
  name,
  expressions,
  actions,
});

/** `${` would be read as an interpolation by add-headers: write it literally. */
const literal = (text: string): string => text.replaceAll('${', () => '$${');

/** A string as a CEL string literal (JSON's escapes are CEL's). */
const celString = (text: string): string => JSON.stringify(text);

/** Trimmed values without the empty ones. */
export const values = (list: string[] | undefined): string[] =>
  (list ?? []).map((v) => v.trim()).filter((v) => v !== '');

/** Trimmed values in lower case without the empty ones (login allow lists). */
export const lowerValues = (list: string[] | undefined): string[] =>
  values(list).map((v) => v.toLowerCase());

const DENY_403: PolicyAction = { type: 'deny', config: { status_code: 403 } };

/** credentials (`user:password` each) → one basic-auth action with all of them. */
export const basicAuthRule = (name: string, credentials: string[]): PolicyRule =>
  rule(name, [{ type: 'basic-auth', config: { credentials } }]);

/** CIDR allow / deny lists and IP policy ids → one restrict-ips action, or none when all empty. */
export function restrictIpsRule(
  name: string,
  allow: string[],
  deny: string[],
  policies: string[] = [],
): PolicyRule | undefined {
  if (allow.length === 0 && deny.length === 0 && policies.length === 0) return undefined;
  const config: Record<string, unknown> = {};
  if (allow.length > 0) config.allow = allow;
  if (deny.length > 0) config.deny = deny;
  if (policies.length > 0) config.ip_policies = policies;
  return rule(name, [{ type: 'restrict-ips', config }]);
}

/**
 * user agent allow / deny regexes → a deny (403) for user agents that match no allow pattern
 * (when there are some) and for those that match a deny pattern; none when both lists are empty.
 */
export function userAgentRule(
  name: string,
  allow: string[],
  deny: string[],
): PolicyRule | undefined {
  const any = (patterns: string[]): string =>
    `getReqHeader('user-agent').exists(ua, ${patterns.map((p) => `ua.matches(${celString(p)})`).join(' || ')})`;
  const expressions: string[] = [];
  if (allow.length > 0) expressions.push(`!${any(allow)}`);
  if (deny.length > 0) expressions.push(any(deny));
  if (expressions.length === 0) return undefined;
  return rule(name, [DENY_403], expressions);
}

/** an error threshold in (0, 1] → circuit-breaker. */
export const circuitBreakerRule = (name: string, threshold: number): PolicyRule =>
  rule(name, [{ type: 'circuit-breaker', config: { error_threshold: threshold } }]);

/** a webhook provider and secret → verify-webhook. */
export const webhookRule = (name: string, provider: string, secret: string): PolicyRule =>
  rule(name, [{ type: 'verify-webhook', config: { provider, secret } }]);

/** response compression → compress-response. */
export const compressionRule = (name: string): PolicyRule =>
  rule(name, [{ type: 'compress-response', config: null }]);

/** header names → remove-headers actions, 10 names an action. */
export function removeHeadersActions(names: string[]): PolicyAction[] {
  const actions: PolicyAction[] = [];
  for (let i = 0; i < names.length; i += 10) {
    actions.push({ type: 'remove-headers', config: { headers: names.slice(i, i + 10) } });
  }
  return actions;
}

/**
 * `name:value` → the header's name in lower case and its value, trimmed; or undefined when there
 * is no name before a colon.
 */
export function headerPair(entry: string): [string, string] | undefined {
  const colon = entry.indexOf(':');
  if (colon <= 0) return undefined;
  return [entry.slice(0, colon).trim().toLowerCase(), entry.slice(colon + 1).trim()];
}

/**
 * headers (lower-case names) → add-headers actions, 10 headers an action, `${` in values kept
 * literal; a name given again starts a new action, so both values are added.
 */
export function addHeadersActions(pairs: Array<[string, string]>): PolicyAction[] {
  const actions: PolicyAction[] = [];
  let current: Record<string, string> = {};
  const flush = (): void => {
    if (Object.keys(current).length > 0)
      actions.push({ type: 'add-headers', config: { headers: current } });
    current = {};
  };
  for (const [name, value] of pairs) {
    if (name in current || Object.keys(current).length === 10) flush();
    current[name] = literal(value);
  }
  flush();
  return actions;
}

/**
 * header names to remove and headers to add → one rule, removals first (the SDKs' header option
 * is one object); none when both lists are empty.
 */
export function headerRule(
  name: string,
  remove: string[],
  add: Array<[string, string]>,
): PolicyRule | undefined {
  const actions = [...removeHeadersActions(remove), ...addHeadersActions(add)];
  return actions.length > 0 ? rule(name, actions) : undefined;
}

/**
 * A login (`config` is the oauth / openid-connect action's) → the login rule named `name`, then,
 * when allow lists are given (from {@link lowerValues}; domains without their `@`), a deny (403)
 * named `denyName` for every identity whose email is neither listed nor at a listed domain.
 */
export function loginRules(
  kind: 'oauth' | 'oidc',
  name: string,
  config: Record<string, unknown>,
  allow: { emails: string[]; domains: string[]; denyName: string },
): PolicyRule[] {
  const rules = [rule(name, [{ type: kind === 'oauth' ? 'oauth' : 'openid-connect', config }])];
  const { emails, domains } = allow;
  if (emails.length > 0 || domains.length > 0) {
    const email = `actions.ngrok.${kind}.identity.email.lowerAscii()`;
    const tests = [
      ...(emails.length > 0 ? [`${email} in [${emails.map(celString).join(', ')}]`] : []),
      ...domains.map((d) => `${email}.endsWith(${celString(`@${d}`)})`),
    ];
    rules.push(rule(allow.denyName, [DENY_403], [`!(${tests.join(' || ')})`]));
  }
  return rules;
}
