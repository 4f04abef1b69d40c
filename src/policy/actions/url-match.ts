import type { RE2JS } from 're2js';
import type { Template } from '../interpolate.js';
import { compileRegex } from '../regex.js';
import type { ConfigReader } from './config.js';
import type { ActionCompileContext, PhaseContext } from './types.js';

/**
 * A `from` regex with its group count, for templates that use `$1`… A `from` with `${}`
 * (`^https?://${req.url.authority}/old/(.*)`) is a template: rendered per request, its variables
 * checked at save like any other template, then compiled (RE2, through the bounded cache).
 */
export interface FromPattern {
  /** The regex for this request, or undefined (an error event says why) when it cannot be built. */
  regex(c: PhaseContext): RE2JS | undefined;
  groups: number;
}

/** Compile `config.from` (RE2 syntax), refusing it with the parser's reason. */
export function readFrom(
  config: ConfigReader,
  ctx: ActionCompileContext,
  required: boolean,
): FromPattern | undefined {
  const source = config.string('from', { required, example: '"^/old/(.*)$"' });
  if (source === undefined) return undefined;
  const template = ctx.template(source, 'from');
  // Interpolated values are not known yet: check the text around them with a stand-in, which
  // also gives the group count the `to` template may refer to.
  const skeleton = template.isStatic ? source : stubInterpolations(source);
  let compiled: RE2JS;
  try {
    compiled = compileRegex(skeleton);
  } catch (err) {
    return config.fail(
      'from',
      `is not a valid regular expression (RE2 syntax): ${(err as Error).message}`,
    );
  }
  if (template.isStatic) return { regex: () => compiled, groups: compiled.groupCount() };
  return { regex: (c) => dynamicRegex(c, template), groups: compiled.groupCount() };
}

/** `from` with each `${…}` replaced by a literal `x` (a `$${` stays a literal `${`). */
function stubInterpolations(source: string): string {
  return source.replace(/\$\{[^}]*\}/g, (m, offset: number) =>
    offset > 0 && source[offset - 1] === '$' ? m : 'x',
  );
}

function dynamicRegex(c: PhaseContext, template: Template): RE2JS | undefined {
  const pattern = c.render(template);
  try {
    return compileRegex(pattern);
  } catch (err) {
    c.event(
      'error',
      `from rendered as ${JSON.stringify(pattern)}, which is not a regular expression: ${(err as Error).message}; the action does nothing`,
    );
    return undefined;
  }
}

/**
 * The request URL with the first match of `from` replaced by `to` (rendered with the match's
 * groups), or undefined when `from` does not match. The URL is the full one (`req.url`:
 * scheme://host/path?query), so patterns may anchor on either end.
 */
export function replaceFirst(c: PhaseContext, from: FromPattern, to: Template): string | undefined {
  const url = c.activation.req!.url.raw;
  const regex = from.regex(c);
  if (!regex) return undefined;
  // re2js types exec() loosely; it returns a RegExpExecArray-shaped array (index, groups).
  const match = regex.exec(url) as RegExpExecArray | null;
  if (!match) return undefined;
  const replacement = c.render(to, match);
  return url.slice(0, match.index) + replacement + url.slice(match.index + match[0].length);
}
