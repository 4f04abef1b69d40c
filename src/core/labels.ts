import { quote } from './quote.js';

/**
 * Tunnel labels (`key=value` pairs a labeled tunnel carries and a tunnel-group backend selects on).
 * Keys allow `/` so that domain-prefixed keys such as `k8s.ngrok.com/service` (used by the
 * Kubernetes operator) work; values also allow `:`. '=' is never allowed: `key=value` is how labels
 * travel in ACL rules and on the command line, so an '=' inside either side would be ambiguous.
 */
export const LABEL_LIMITS = {
  maxLabels: 10,
  keyMaxLength: 64,
  valueMaxLength: 128,
} as const;

const KEY_RE = /^[A-Za-z0-9._/-]+$/;
const VALUE_RE = /^[A-Za-z0-9._/:-]+$/;

/** Which rule a label key or value breaks. */
export type LabelProblem =
  { part: 'key' | 'value'; rule: 'equals' | 'length' | 'charset'; message: string } | undefined;

function partProblem(part: 'key' | 'value', text: string): LabelProblem {
  const max = part === 'key' ? LABEL_LIMITS.keyMaxLength : LABEL_LIMITS.valueMaxLength;
  const shown = quote(text, '"');
  if (text.includes('=')) {
    return { part, rule: 'equals', message: `label ${part} ${shown} must not contain '='` };
  }
  if (text.length < 1 || text.length > max) {
    return {
      part,
      rule: 'length',
      message: `label ${part} length is limited to between 1 and ${max} characters; ${part} ${shown} has ${text.length}`,
    };
  }
  const re = part === 'key' ? KEY_RE : VALUE_RE;
  if (!re.test(text)) {
    const allowed = part === 'key' ? 'A-Z a-z 0-9 . _ - /' : 'A-Z a-z 0-9 . _ - / :';
    return {
      part,
      rule: 'charset',
      message: `label ${part} ${shown} may contain only the characters ${allowed}`,
    };
  }
  return undefined;
}

/**
 * What is wrong with one label, or undefined when key and value are acceptable.
 * @example labelProblem('app', 'a=b') // { part: 'value', rule: 'equals', ... }
 */
export function labelProblem(key: string, value: string): LabelProblem {
  return partProblem('key', key) ?? partProblem('value', value);
}

/**
 * Split one label written `key=value` (the `--label` flag, ngrok.yml's `labels` list, the device
 * agent's list form) at its first '=', both sides trimmed; undefined when either side is empty.
 * Whether the key and value are acceptable is {@link labelProblem}'s call.
 * @example splitLabel('app=web') // ['app', 'web']
 */
export function splitLabel(text: string): [key: string, value: string] | undefined {
  const eq = text.indexOf('=');
  if (eq <= 0) return undefined;
  const key = text.slice(0, eq).trim();
  const value = text.slice(eq + 1).trim();
  return key === '' || value === '' ? undefined : [key, value];
}
