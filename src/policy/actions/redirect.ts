import type { Template } from '../interpolate.js';
import { checkHeaderName } from './header-names.js';
import { readFrom, replaceFirst } from './url-match.js';
import type { ActionSpec } from './types.js';

const REDIRECT_STATUSES = [301, 302, 303, 307, 308];

/**
 * `redirect`: answer with a redirect to `to`. With `from` (RE2, searched in the full URL) it acts
 * only when `from` matches, and the location is the URL with the match replaced by `to` (`$1`…
 * are its groups); without `from` it always redirects to `to`. `status_code` is 301, 302
 * (default), 303, 307 or 308; up to 10 `headers` go with it. `${}` interpolates in `to` and values.
 * @example { type: 'redirect', config: { from: '^http://(.*)$', to: 'https://$1', status_code: 301 } }
 */
export const redirectAction: ActionSpec = {
  type: 'redirect',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['from', 'to', 'status_code', 'headers'],
  compile(config, ctx) {
    const from = readFrom(config, ctx, false);
    const to = ctx.template(
      config.string('to', { required: true, example: '"https://example.com/"' })!,
      'to',
      from?.groups,
    );
    const status = config.integer('status_code', { min: 300, max: 399 }) ?? 302;
    if (!REDIRECT_STATUSES.includes(status)) {
      config.fail('status_code', `must be one of ${REDIRECT_STATUSES.join(', ')}, not ${status}`);
    }
    const headerMap = config.stringMap('headers', { min: 0, max: 10 }) ?? {};
    const headers: Array<[string, Template]> = Object.entries(headerMap).map(([name, value]) => {
      const lower = checkHeaderName(config, `headers.${name}`, name, 'set');
      if (lower === 'location')
        config.fail(`headers.${name}`, 'cannot be set here: the location is `to`');
      return [lower, ctx.template(value, `headers.${name}`)];
    });
    return {
      alwaysTerminates: from === undefined,
      run(c) {
        const location = from ? replaceFirst(c, from, to) : c.render(to);
        if (location === undefined) return undefined;
        const out: Record<string, string> = {};
        for (const [name, value] of headers) out[name] = c.render(value);
        // As rendered: a location holding a control character is refused where the edge writes
        // the answer (a 502 page), never cleaned into another URL.
        out.location = location;
        c.event('redirected', `redirected with ${status} to ${out.location}`, {
          status_code: status,
          location: out.location,
        });
        return { kind: 'respond', status, headers: out, body: '' };
      },
    };
  },
};
