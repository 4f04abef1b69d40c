import { CODES } from '../../core/errors.js';
import type { Template } from '../interpolate.js';
import { mapChildren } from './config.js';
import type { ActionCompileContext, ActionSpec, PhaseContext } from './types.js';

type Shape = string | number | boolean | null | Template | Shape[] | { [key: string]: Shape };

/** Compile every string inside `value` (at any depth) as a template. */
function compileValue(value: unknown, key: string, ctx: ActionCompileContext): Shape {
  if (typeof value === 'string') {
    const t = ctx.template(value, key);
    return t.isStatic ? value : t;
  }
  // Lists and mappings hold only what this returns, so the walk's result is a Shape too.
  return mapChildren(value, (v, suffix) => compileValue(v, `${key}${suffix}`, ctx)) as Shape;
}

function isTemplate(value: Shape): value is Template {
  return typeof value === 'object' && value !== null && 'render' in value;
}

function render(value: Shape, c: PhaseContext): unknown {
  if (isTemplate(value)) return c.render(value);
  // Below a compiled Shape there are only Shapes.
  return mapChildren(value, (v) => render(v as Shape, c));
}

/**
 * `log`: record an event with `metadata` (any mapping; strings anywhere in it may interpolate
 * `${}`) to the structured log and the owner's event ring. `metadata.message`, when a string,
 * becomes the event's message.
 * @example { type: 'log', config: { metadata: { message: 'blocked', ip: '${conn.client_ip}' } } }
 */
export const logAction: ActionSpec = {
  type: 'log',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  termination: 'never',
  configKeys: ['metadata'],
  compile(config, ctx) {
    const raw = config.value('metadata') ?? {};
    if (typeof raw !== 'object' || Array.isArray(raw)) {
      config.fail(
        'metadata',
        'must be a mapping of names to values, e.g. {"message": "blocked ${conn.client_ip}"}',
        CODES.policyActionConfig,
      );
    }
    const metadata = compileValue(raw, 'metadata', ctx);
    return {
      alwaysTerminates: false,
      run(c) {
        const values = render(metadata, c) as Record<string, unknown>;
        const message = typeof values.message === 'string' ? values.message : 'log action';
        c.event('log', message, values);
        c.setActionResult('log', { metadata: values });
        return undefined;
      },
    };
  },
};
