import { compileExpression, ExpressionError, type CompiledExpression } from './cel.js';
import type { PolicyPhase } from './parse.js';
import { celToString } from './cel-types.js';
import { SecretText, type SecretRef } from './secrets.js';
import type { Activation } from './variables.js';

/**
 * `${expr}` interpolation in action string values (`X-Client-IP: "${conn.client_ip}"`). A
 * template is split once, at compile time, into literal text and compiled expressions; `$${`
 * writes a literal `${`. Templates of url-rewrite and redirect may also use `$1`…`$99`, the
 * groups of their `from` regex.
 */

/**
 * A `$N` that names a group the regex does not have: a config value error, not a CEL one, so the
 * policy compiler reports it as the action's config value (`ERR_NGROK_2204`), not as 2200.
 */
export class GroupReferenceError extends ExpressionError {}

type Part = string | CompiledExpression | { group: number };

/** A compiled template. `render` throws when an expression fails to evaluate. */
export interface Template {
  readonly source: string;
  /** True when the text has no `${}` and no group references: render always gives `text`. */
  readonly isStatic: boolean;
  /** The secrets its interpolations read. */
  readonly secrets: readonly SecretRef[];
  /**
   * Some `${}` is a whole `secrets.get` call, so the rendered text holds a secret value: only an
   * action that sends the text away as it is may accept such a template.
   */
  readonly placesSecret: boolean;
  render(activation: Activation, groups?: ArrayLike<string | undefined>): string;
}

/** Where an interpolation ends: the `}` matching its `${`, skipping quoted text and map literals. */
function closingBrace(text: string, from: number): number {
  let depth = 1;
  let quote: string | undefined;
  for (let i = from; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = undefined;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
    } else if (ch === '{') {
      depth++;
    } else if (ch === '}' && --depth === 0) {
      return i;
    }
  }
  return -1;
}

/**
 * Compile `text`. `maxGroup` enables `$N` group references up to that group count (use it for
 * templates paired with a regex). `outbound`: the text is sent as it is (a header value, a
 * response body), so a `${secrets.get(…)}` renders as the secret; elsewhere as `[secret]` (the
 * policy compiler refuses such templates anyway). Throws {@link ExpressionError} naming the bad
 * interpolation.
 * @example compileTemplate('ip=${conn.client_ip}', 'on_tcp_connect').isStatic // false
 */
export function compileTemplate(
  text: string,
  phase: PolicyPhase,
  maxGroup?: number,
  outbound = false,
): Template {
  const parts: Part[] = [];
  let literal = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '$' && text.startsWith('$${', i)) {
      literal += '${';
      i += 3;
    } else if (ch === '$' && text[i + 1] === '{') {
      const end = closingBrace(text, i + 2);
      if (end < 0) {
        throw new ExpressionError(
          `the interpolation starting at character ${i + 1} has no closing '}'; write \${expression}, or $\${ for a literal \${`,
        );
      }
      const source = text.slice(i + 2, end).trim();
      if (source === '')
        throw new ExpressionError(`empty interpolation \${} at character ${i + 1}`);
      let expr: CompiledExpression;
      try {
        expr = compileExpression(source, phase, 'value');
      } catch (err) {
        if (err instanceof ExpressionError) {
          throw new ExpressionError(`in \${${source}}: ${err.message}`, { cause: err });
        }
        throw err;
      }
      if (literal) parts.push(literal);
      literal = '';
      parts.push(expr);
      i = end + 1;
    } else if (ch === '$' && maxGroup !== undefined && /\d/.test(text[i + 1] ?? '')) {
      const digits = /^\d{1,2}/.exec(text.slice(i + 1))![0];
      const group = Number(digits);
      if (group > maxGroup) {
        throw new GroupReferenceError(
          `$${group} refers to capture group ${group}, but the from regex has ${maxGroup === 0 ? 'no groups' : `only ${maxGroup}`}; add parentheses around the part to capture`,
        );
      }
      if (literal) parts.push(literal);
      literal = '';
      parts.push({ group });
      i += 1 + digits.length;
    } else {
      // Up to the next '$' at once: a string built a character at a time is kept by V8 as a tree
      // of its characters (~30 bytes each), which every compiled policy would hold.
      const next = text.indexOf('$', i + 1);
      const stop = next < 0 ? text.length : next;
      literal += text.slice(i, stop);
      i = stop;
    }
  }
  if (literal || parts.length === 0) parts.push(literal);
  if (parts.length === 1 && typeof parts[0] === 'string') {
    const only = parts[0];
    return { source: text, isStatic: true, secrets: [], placesSecret: false, render: () => only };
  }
  const expressions = parts.filter(
    (p): p is CompiledExpression => typeof p === 'object' && 'evaluate' in p,
  );
  return {
    source: text,
    isStatic: false,
    secrets: expressions.flatMap((e) => e.secrets),
    placesSecret: expressions.some((e) => e.bareSecret),
    render(activation, groups) {
      let out = '';
      for (const part of parts) {
        if (typeof part === 'string') out += part;
        else if ('group' in part) out += groups?.[part.group] ?? '';
        else {
          const value = part.evaluate(activation);
          out += outbound && value instanceof SecretText ? value.reveal() : celToString(value);
        }
      }
      return out;
    },
  };
}
