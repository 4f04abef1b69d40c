import { CODES } from '../../core/errors.js';
import type { Template } from '../interpolate.js';
import { mapChildren } from './config.js';
import type { ActionSpec } from './types.js';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_VARS = 32;

/** A config value as CEL sees it: whole numbers become ints (bigints), the rest stays. */
function toCel(value: unknown): unknown {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  return mapChildren(value, toCel);
}

/**
 * `set-vars`: set variables later expressions and interpolations read as `vars.<name>` (in this
 * phase and, through the decision's `vars`, in later phases of the same connection or request).
 * `vars` is a list of one-entry mappings (or one mapping); string values may interpolate `${}`.
 * @example { type: 'set-vars', config: { vars: [{ country: '${conn.geo.country_code}' }] } }
 */
export const setVarsAction: ActionSpec = {
  type: 'set-vars',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  termination: 'never',
  configKeys: ['vars'],
  compile(config, ctx) {
    const raw = config.value('vars');
    if (raw === undefined) config.fail('vars', 'is required, e.g. [{"tier": "gold"}]');
    const entries: Array<[string, unknown]> = [];
    const list = Array.isArray(raw) ? raw : [raw];
    list.forEach((item: unknown, i) => {
      const key = Array.isArray(raw) ? `vars[${i}]` : 'vars';
      if (typeof item !== 'object' || item === null || Array.isArray(item)) {
        config.fail(
          key,
          'must be a mapping of variable names to values, e.g. {"tier": "gold"}',
          CODES.policyActionConfig,
        );
      }
      entries.push(...Object.entries(item as Record<string, unknown>));
    });
    if (entries.length === 0) config.fail('vars', 'must set at least one variable');
    if (entries.length > MAX_VARS)
      config.fail('vars', `sets ${entries.length} variables; the limit is ${MAX_VARS}`);
    const compiled: Array<[string, unknown]> = entries.map(([name, value]) => {
      if (!NAME.test(name)) {
        config.fail(
          `vars.${name}`,
          'is not a variable name: use letters, digits and _, not starting with a digit',
        );
      }
      return [name, typeof value === 'string' ? ctx.template(value, `vars.${name}`) : toCel(value)];
    });
    return {
      alwaysTerminates: false,
      run(c) {
        for (const [name, value] of compiled) {
          const isTemplate = typeof value === 'object' && value !== null && 'render' in value;
          c.setVar(name, isTemplate ? c.render(value as Template) : value);
        }
        return undefined;
      },
    };
  },
};
