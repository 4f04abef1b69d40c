import { isIP } from 'node:net';
import { parseHostPort } from './host-port.js';
import { hostnameProblem } from './hostname.js';
import { labelProblem } from './labels.js';
import { quote } from './quote.js';

/**
 * Authtoken ACL rules: `*`, `bind:*`, `bind:<domain>`, `bind:*.<suffix>`, `bind:<host>:<port>` and
 * label rules `bind:<key>=<value>` where either side may be `*`; and `secrets:read:<vault name>`
 * (`secrets:read:*` for every vault), which lets the authtoken's policies read that vault's
 * secrets. A list with no bind rule (empty, or only secrets rules) permits every bind; only
 * secrets rules grant reading secrets (`*` does not, so that older allow-all tokens read none).
 */
export type AclRule =
  | { kind: 'any' }
  | { kind: 'domain'; name: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'addr'; host: string; port: number }
  | { kind: 'label'; key: string; value: string }
  | { kind: 'secrets'; vault: string };

/** The prefix of the rules that grant reading a vault's secrets. */
export const SECRETS_READ_PREFIX = 'secrets:read:';

/** What an agent asks to bind, as the ACL sees it. */
export type BindTarget =
  | { kind: 'domain'; name: string }
  | { kind: 'addr'; host: string; port: number }
  | { kind: 'random-addr' }
  | { kind: 'labels'; labels: Record<string, string> };

const HOST_LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A host an address rule may name: IPv4, bracketed IPv6, or a DNS name (one label allowed). */
function isAddrHost(host: string): boolean {
  if (host.startsWith('[')) return isIP(host.slice(1, -1)) === 6;
  if (isIP(host) === 4) return true;
  return host.length <= 253 && host.split('.').every((l) => HOST_LABEL_RE.test(l));
}

/** Parse one rule, or return a message saying what is wrong with it. */
export function parseAclRule(rule: string): AclRule | { error: string } {
  if (rule === '*' || rule === 'bind:*') return { kind: 'any' };
  if (rule.startsWith(SECRETS_READ_PREFIX)) return parseSecretsRule(rule);
  if (!rule.startsWith('bind:')) {
    return {
      error: `ACL rule ${quote(rule)} must be '*' or start with 'bind:' or '${SECRETS_READ_PREFIX}'`,
    };
  }
  const value = rule.slice('bind:'.length);
  if (value.includes('=')) {
    const [key, val, ...rest] = value.split('=');
    if (rest.length > 0 || !key || !val) {
      return {
        error: `label rule ${quote(rule)} must have the form bind:<key>=<value> ('*' allowed on either side)`,
      };
    }
    // A wildcard stands for a whole side; anything else must be a label an agent could send.
    const problem = labelProblem(key === '*' ? 'k' : key, val === '*' ? 'v' : val);
    if (problem) return { error: `label rule ${quote(rule)}: ${problem.message}` };
    return { kind: 'label', key, value: val };
  }
  const hp = parseHostPort(value, { minPort: 1, keepBrackets: true });
  if (hp) {
    const host = hp.host.toLowerCase();
    if (!isAddrHost(host)) {
      return {
        error: `address rule ${quote(rule)} must name a host (a DNS name or an IP address, no wildcard) and a port: bind:<host>:<port>`,
      };
    }
    return { kind: 'addr', host, port: hp.port };
  }
  const name = value.toLowerCase();
  if (name.startsWith('*.')) {
    if (hostnameProblem(name, true)) {
      return {
        error: `ACL rule ${quote(rule)} must name a domain, a wildcard domain '*.<domain>', an address '<host>:<port>' or a label '<key>=<value>'`,
      };
    }
    return { kind: 'suffix', suffix: name.slice(2) };
  }
  if (hostnameProblem(name, false) && name !== 'localhost') {
    return {
      error: `ACL rule ${quote(rule)} must name a domain, a wildcard domain '*.<domain>', an address '<host>:<port>' or a label '<key>=<value>'`,
    };
  }
  return { kind: 'domain', name };
}

/** The longest vault name the API accepts, in UTF-8 bytes (api/schemas.ts Name). */
const VAULT_NAME_MAX_BYTES = 255;
// eslint-disable-next-line no-control-regex -- a vault name is one line of text
const CONTROL = /[\u0000-\u001f\u007f]/;

/** `secrets:read:<vault name>`: the name as the vault has it (case counts), or `*`. */
function parseSecretsRule(rule: string): AclRule | { error: string } {
  const vault = rule.slice(SECRETS_READ_PREFIX.length);
  if (vault === '' || CONTROL.test(vault) || Buffer.byteLength(vault) > VAULT_NAME_MAX_BYTES) {
    return {
      error: `secrets rule ${quote(rule)} must name a vault (one line, at most ${VAULT_NAME_MAX_BYTES} bytes) or '*': ${SECRETS_READ_PREFIX}<vault name>`,
    };
  }
  return { kind: 'secrets', vault };
}

/**
 * Whether parsed ACL `rules` let an authtoken's policies read the secrets of vault `vault`
 * (a `secrets:read:<vault>` or `secrets:read:*` rule; nothing else grants it).
 * @example aclReadsVault([{ kind: 'secrets', vault: 'prod' }], 'prod') // true
 */
export function aclReadsVault(rules: readonly AclRule[], vault: string): boolean {
  return rules.some((r) => r.kind === 'secrets' && (r.vault === '*' || r.vault === vault));
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
    case 'domain': {
      // Rules are stored lowercase; DNS names compare without case.
      const name = target.name.toLowerCase();
      if (rule.kind === 'domain') return rule.name === name;
      if (rule.kind === 'suffix') return name.endsWith('.' + rule.suffix);
      return false;
    }
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
 * Whether parsed ACL `rules` permit binding `target`. An ACL with no bind rule permits every bind; random TCP
 * addresses need an empty ACL or `*`; every label of a labeled tunnel must be permitted.
 * @example aclPermits([{ kind: 'suffix', suffix: 'sitea.example.com' }], { kind: 'domain', name: 'a.sitea.example.com' }) // true
 */
export function aclPermits(rules: readonly AclRule[], target: BindTarget): boolean {
  // Secrets rules say nothing about binds: a list of only those restricts binds no more than [].
  if (!rules.some((r) => r.kind !== 'secrets')) return true;
  if (target.kind === 'labels') {
    const entries = Object.entries(target.labels);
    // With no labels `every` would be vacuously true; only an allow-all rule permits that.
    if (entries.length === 0) return rules.some((r) => r.kind === 'any');
    return entries.every(([k, v]) => labelAllowed(rules, k, v));
  }
  return rules.some((r) => ruleAllows(r, target));
}
