import { checkHeaderName } from './header-names.js';
import type { ActionSpec } from './types.js';

/**
 * `remove-headers`: drop headers (every value of each name, any case) from the request or the
 * response.
 * @example { type: 'remove-headers', config: { headers: ['x-powered-by', 'server'] } }
 */
export const removeHeadersAction: ActionSpec = {
  type: 'remove-headers',
  phases: ['on_http_request', 'on_http_response'],
  termination: 'never',
  configKeys: ['headers'],
  compile(config, ctx) {
    const list = config.stringList('headers', {
      min: 1,
      max: 10,
      required: true,
      example: '["x-powered-by"]',
    })!;
    const names = list.map((name, i) => {
      const lower = checkHeaderName(config, `headers[${i}]`, name, 'remove');
      if (lower === 'host' && ctx.phase === 'on_http_request') {
        config.fail(
          `headers[${i}]`,
          "cannot remove 'host': an HTTP/1.1 request needs one; to change it, use add-headers with host",
        );
      }
      return lower;
    });
    return {
      alwaysTerminates: false,
      fixedHeaderEdits: true,
      run(c) {
        const edits = c.headers!;
        for (const name of names) edits.remove(name);
        c.publishHeaders();
        return undefined;
      },
    };
  },
};
