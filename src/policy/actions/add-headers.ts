import type { Template } from '../interpolate.js';
import { checkHeaderName } from './header-names.js';
import { REDACTED } from '../secrets.js';
import type { ActionSpec } from './types.js';

/**
 * `add-headers`: append headers to the request (on_http_request, before it goes upstream) or to
 * the response (on_http_response). Values may interpolate `${}`. Adding `host` replaces it.
 * @example { type: 'add-headers', config: { headers: { 'x-client-ip': '${conn.client_ip}' } } }
 */
export const addHeadersAction: ActionSpec = {
  type: 'add-headers',
  phases: ['on_http_request', 'on_http_response'],
  termination: 'never',
  configKeys: ['headers'],
  compile(config, ctx) {
    const headers = config.stringMap('headers', {
      min: 1,
      max: 10,
      required: true,
      example: '{"x-burrow": "1"}',
    })!;
    const entries: Array<[string, Template]> = Object.entries(headers).map(([name, value]) => [
      checkHeaderName(config, `headers.${name}`, name, 'add'),
      ctx.outboundTemplate(value, `headers.${name}`),
    ]);
    const replacesHost = ctx.phase === 'on_http_request';
    return {
      alwaysTerminates: false,
      fixedHeaderEdits: entries.every(([, value]) => value.isStatic),
      run(c) {
        const edits = c.headers!;
        // Built only when some expression reads it (`actions.ngrok.add_headers`).
        const added: Record<string, string> | undefined = c.recordsResults ? {} : undefined;
        for (const [name, value] of entries) {
          if (replacesHost && name === 'host') edits.remove('host');
          // A value holding a secret goes out as it is, but later rules read it as [secret].
          const text = c.render(value);
          edits.add(name, text, value.placesSecret);
          if (added) added[name] = value.placesSecret ? REDACTED : text;
        }
        c.publishHeaders();
        if (added) c.setActionResult('add_headers', { headers_added: added });
        return undefined;
      },
    };
  },
};
