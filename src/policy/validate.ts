import type { ValidationError } from '../core/errors.js';
import { compilePolicy } from './compile.js';
import type { PolicyProtocol } from './parse.js';

/**
 * Save-time validation, for every place a policy is accepted (the edges' traffic_policy module,
 * agent binds, the device agent). Validating is compiling: a policy that passes is exactly one
 * the engine can run, and the compiled result is cached for when traffic arrives.
 *
 * Codes (docs/traffic-policy.md, Errors): 2236 unparseable; 2200 bad expression (also in `${}` and
 * bucket_key); 2201 unknown action type; 2202 action in the wrong phase; 2203 config of the
 * wrong shape or with unknown keys; 2204 config value out of range; 2205 action unsupported on the
 * protocol; 2206 rule without actions; 2207 action after one that always ends the phase; 2230
 * phase the protocol does not run.
 */

/**
 * Check policy `text` (JSON or YAML) for an endpoint of `protocol`; throws a
 * {@link ValidationError} (HTTP 400 with the code) naming `field`, the phase, the rule, the
 * action and the fix.
 * @example validatePolicy(body.value, 'tls', 'value') // throws ERR_NGROK_2200 for a bad expression
 */
export function validatePolicy(text: string, protocol: PolicyProtocol, field: string): void {
  compilePolicy(text, { protocol, field });
}

export type { ValidationError };
