import { quote } from '../../core/quote.js';
import { isHeaderName } from '../headers.js';
import type { ConfigReader } from './config.js';

/**
 * Headers a policy may not add or remove: they frame the message or the connection, and the
 * ingress owns them.
 */
export const FRAMING_HEADERS = [
  'connection',
  'content-length',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];

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
  if (FRAMING_HEADERS.includes(lower)) {
    config.fail(
      key,
      `cannot ${verb} '${lower}': the edge manages framing headers (${FRAMING_HEADERS.join(', ')})`,
    );
  }
  return lower;
}
