import { FRAMING_HEADERS } from '../../core/http-framing.js';
import { quote } from '../../core/quote.js';
import { isHeaderName } from '../headers.js';
import type { ConfigReader } from './config.js';

/**
 * Check header name `name` (found at `config.<key>`) and return it lower-cased.
 * @example checkHeaderName(config, 'headers', 'X-Burrow', 'add') // 'x-burrow'
 */
export function checkHeaderName(
  config: ConfigReader,
  key: string,
  name: string,
  verb: 'add' | 'remove' | 'set',
): string {
  if (!isHeaderName(name)) {
    config.fail(
      key,
      `has ${quote(name, '"')}, which is not a header name: use letters, digits and !#$%&'*+.^_\`|~-, with no spaces or colons`,
    );
  }
  const lower = name.toLowerCase();
  if (FRAMING_HEADERS.has(lower)) {
    config.fail(
      key,
      `cannot ${verb} '${lower}': the edge manages framing headers (${[...FRAMING_HEADERS].join(', ')})`,
    );
  }
  return lower;
}
