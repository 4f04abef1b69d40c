import { hostnameProblem, splitHostPort } from './hostname.js';

/**
 * Authtoken ACL rules: `*`, `bind:*`, `bind:<domain>`, `bind:*.<suffix>`, `bind:<host>:<port>` and
 * label rules `bind:<key>=<value>` where either side may be `*`. An empty list permits everything.
 */
export type AclRule =
  | { kind: 'any' }
  | { kind: 'domain'; name: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'addr'; host: string; port: number }
  | { kind: 'label'; key: string; value: string };

/** What an agent asks to bind, as the ACL sees it. */
export type BindTarget =
  | { kind: 'domain'; name: string }
  | { kind: 'addr'; host: string; port: number }
  | { kind: 'random-addr' }
  | { kind: 'labels'; labels: Record<string, string> };

/** Parse one rule, or return a message saying what is wrong with it. */
export function parseAclRule(rule: string): AclRule | { error: string } {
  if (rule === '*' || rule === 'bind:*') return { kind: 'any' };
  if (!rule.startsWith('bind:')) {
    return { error: `ACL rule '${rule}' must be '*' or start with 'bind:'` };
  }
  const value = rule.slice('bind:'.length);
  if (value.includes('=')) {
    const [key, val, ...rest] = value.split('=');
    if (rest.length > 0 || !key || !val) {
      return {
        error: `label rule '${rule}' must have the form bind:<key>=<value> ('*' allowed on either side)`,
      };
    }
    return { kind: 'label', key, value: val };
  }
  const hp = splitHostPort(value);
  if (hp) return { kind: 'addr', host: hp.host.toLowerCase(), port: hp.port };
  const name = value.toLowerCase();
  if (name.startsWith('*.')) {
    if (hostnameProblem(name, true)) {
      return {
        error: `ACL rule '${rule}' must name a domain, a wildcard domain '*.<domain>', an address '<host>:<port>' or a label '<key>=<value>'`,
      };
    }
    return { kind: 'suffix', suffix: name.slice(2) };
  }
  if (hostnameProblem(name, false) && name !== 'localhost') {
    return {
      error: `ACL rule '${rule}' must name a domain, a wildcard domain '*.<domain>', an address '<host>:<port>' or a label '<key>=<value>'`,
    };
  }
  return { kind: 'domain', name };
}

/** Parse every rule; throws nothing, returns the first problem found. */
export function parseAcl(
  rules: readonly string[],
): { rules: AclRule[] } | { error: string; index: number } {
  const parsed: AclRule[] = [];
  for (let i = 0; i < rules.length; i++) {
    const r = parseAclRule(rules[i]!);
    if ('error' in r) return { error: r.error, index: i };
    parsed.push(r);
  }
  return { rules: parsed };
}

function ruleAllows(rule: AclRule, target: BindTarget): boolean {
  if (rule.kind === 'any') return true;
  switch (target.kind) {
    case 'domain':
      if (rule.kind === 'domain') return rule.name === target.name;
      if (rule.kind === 'suffix') {
        return target.name === '*.' + rule.suffix || target.name.endsWith('.' + rule.suffix);
      }
      return false;
    case 'addr':
      return (
        rule.kind === 'addr' && rule.host === target.host.toLowerCase() && rule.port === target.port
      );
    case 'random-addr':
      return false;
    case 'labels':
      return false;
  }
}

function labelAllowed(rules: readonly AclRule[], key: string, value: string): boolean {
  return rules.some(
    (r) =>
      r.kind === 'any' ||
      (r.kind === 'label' &&
        (r.key === '*' || r.key === key) &&
        (r.value === '*' || r.value === value)),
  );
}

/**
 * Whether parsed ACL `rules` permit binding `target`. An empty ACL permits everything; random TCP
 * addresses need an empty ACL or `*`; every label of a labeled tunnel must be permitted.
 * @example aclPermits([{ kind: 'suffix', suffix: 'sitea.example.com' }], { kind: 'domain', name: 'a.sitea.example.com' }) // true
 */
export function aclPermits(rules: readonly AclRule[], target: BindTarget): boolean {
  if (rules.length === 0) return true;
  if (target.kind === 'labels') {
    return Object.entries(target.labels).every(([k, v]) => labelAllowed(rules, k, v));
  }
  return rules.some((r) => ruleAllows(r, target));
}
