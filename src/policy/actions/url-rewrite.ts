import { normalizeOriginForm } from '../../core/request-target.js';
import { readFrom, replaceFirst } from './url-match.js';
import type { ActionSpec } from './types.js';

/**
 * The path and query to send upstream for a rewritten URL: a result that starts with `/` is used
 * as it is; an absolute URL gives its path and query (the host stays: use redirect to send the
 * client elsewhere). Undefined when the result cannot be read as a URL.
 * @example rewriteTarget('https://a.example/items/5?x=1') // '/items/5?x=1'
 */
export function rewriteTarget(result: string, origin?: string): string | undefined {
  if (result.startsWith('/')) return result;
  // The usual case: the match was in the path, so the origin is unchanged and needs no parsing.
  if (origin && result.startsWith(origin) && /^[/?]/.test(result.slice(origin.length))) {
    const rest = result.slice(origin.length);
    return rest.startsWith('?') ? `/${rest}` : rest;
  }
  try {
    const url = new URL(result);
    return `${url.pathname}${url.search}`;
  } catch {
    return undefined;
  }
}

/**
 * `url-rewrite`: change the URL the upstream service sees, without telling the client. The first
 * match of `from` (RE2, searched in the full URL `req.url`) is replaced with `to`, where `$1`…
 * are its groups and `${}` interpolates. Later rules see the new `req.url`.
 * @example { type: 'url-rewrite', config: { from: '/products/([0-9]+)', to: '/items/$1' } }
 */
export const urlRewriteAction: ActionSpec = {
  type: 'url-rewrite',
  phases: ['on_http_request'],
  termination: 'never',
  configKeys: ['from', 'to'],
  compile(config, ctx) {
    const from = readFrom(config, ctx, true)!;
    const to = ctx.template(
      config.string('to', { required: true, example: '"/new/$1"' })!,
      'to',
      from.groups,
    );
    return {
      alwaysTerminates: false,
      run(c) {
        const result = replaceFirst(c, from, to);
        if (result === undefined) return undefined;
        const target = rewriteTarget(result, c.activation.req!.url.origin);
        if (target === undefined) {
          c.event(
            'error',
            `url-rewrite produced ${JSON.stringify(result)}, which is not a URL; the request goes on unchanged`,
          );
          return undefined;
        }
        // Read as the edge reads every target (dot segments removed…), so later rules see the
        // path the service gets. One it cannot read (a control character, say) stays as it is:
        // the ingress refuses it with a 400 where it would write it (http-policy-writes.ts rewrittenRequest).
        const read = normalizeOriginForm(target);
        const written = 'target' in read ? read.target : target;
        c.rewrite = written;
        c.activation.req!.setTarget(written);
        return undefined;
      },
    };
  },
};
