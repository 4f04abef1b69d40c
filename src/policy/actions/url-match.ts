import type { RE2JS } from 're2js';
import type { Template } from '../interpolate.js';
import { compileRegex } from '../regex.js';
import type { ConfigReader } from './config.js';
import type { PhaseContext } from './types.js';

/** A `from` regex with its group count, for templates that use `$1`… */
export interface FromPattern {
  regex: RE2JS;
  groups: number;
}

/** Compile `config.from` (RE2 syntax), refusing it with the parser's reason. */
export function readFrom(config: ConfigReader, required: boolean): FromPattern | undefined {
  const source = config.string('from', { required, example: '"^/old/(.*)$"' });
  if (source === undefined) return undefined;
  try {
    const regex = compileRegex(source);
    return { regex, groups: regex.groupCount() };
  } catch (err) {
    return config.fail(
      'from',
      `is not a valid regular expression (RE2 syntax): ${(err as Error).message}`,
    );
  }
}

/**
 * The request URL with the first match of `from` replaced by `to` (rendered with the match's
 * groups), or undefined when `from` does not match. The URL is the full one (`req.url`:
 * scheme://host/path?query), so patterns may anchor on either end.
 */
export function replaceFirst(c: PhaseContext, from: FromPattern, to: Template): string | undefined {
  const url = c.activation.req!.url.raw;
  // re2js types exec() loosely; it returns a RegExpExecArray-shaped array (index, groups).
  const match = from.regex.exec(url) as RegExpExecArray | null;
  if (!match) return undefined;
  const replacement = c.render(to, match);
  return url.slice(0, match.index) + replacement + url.slice(match.index + match[0].length);
}
