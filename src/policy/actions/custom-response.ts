import type { Template } from '../interpolate.js';
import { checkHeaderName } from './header-names.js';
import type { ActionSpec } from './types.js';

/**
 * The media type of a body nobody labelled: JSON when it parses as an object or list, HTML when
 * it starts with a tag, plain text otherwise.
 * @example inferContentType('{"ok":true}') // 'application/json'
 */
export function inferContentType(body: string): string {
  const start = body.trimStart()[0];
  if (start === '{' || start === '[') {
    try {
      JSON.parse(body);
      return 'application/json';
    } catch {
      // not JSON after all: fall through to text
    }
  }
  if (start === '<') return 'text/html; charset=utf-8';
  return 'text/plain; charset=utf-8';
}

/**
 * `custom-response`: answer the client directly (on_http_request) or replace the upstream's
 * response (on_http_response) with `status_code` (default 200), `body` (`content` in 2024
 * documents) and up to 10 `headers`; body and header values may interpolate `${}`. Without a
 * content-type header one is inferred from the body.
 * @example { type: 'custom-response', config: { status_code: 503, body: 'down for maintenance' } }
 */
export const customResponseAction: ActionSpec = {
  type: 'custom-response',
  phases: ['on_http_request', 'on_http_response'],
  termination: 'always',
  configKeys: ['status_code', 'body', 'content', 'headers'],
  compile(config, ctx) {
    const status = config.integer('status_code', { min: 200, max: 599 }) ?? 200;
    if (config.has('body') && config.has('content')) {
      config.fail('content', 'is the older name of body; give one of them, not both');
    }
    const key = config.has('content') ? 'content' : 'body';
    const bodyText = config.string(key) ?? '';
    if (bodyText !== '' && (status === 204 || status === 304)) {
      config.fail(key, `must be empty: a ${status} response has no body`);
    }
    // Sent to the client as written: the one kind of text a policy may place a secret in.
    const body = ctx.outboundTemplate(bodyText, key);
    const headerMap = config.stringMap('headers', { min: 0, max: 10 }) ?? {};
    const headers: Array<[string, Template]> = Object.entries(headerMap).map(([name, value]) => [
      checkHeaderName(config, `headers.${name}`, name, 'set'),
      ctx.outboundTemplate(value, `headers.${name}`),
    ]);
    const labelled = headers.some(([name]) => name === 'content-type');
    return {
      alwaysTerminates: true,
      run(c) {
        const text = c.render(body);
        const out: Record<string, string> = {};
        for (const [name, value] of headers) out[name] = c.render(value);
        if (!labelled && text !== '') out['content-type'] = inferContentType(text);
        c.event('responded', `custom response ${status}`, { status_code: status });
        return { kind: 'respond', status, headers: out, body: text };
      },
    };
  },
};
