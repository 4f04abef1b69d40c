import { STATUS_CODES } from 'node:http';
import { CODES } from '../../core/errors.js';
import { CLOSE, type ActionSpec, type Terminal } from './types.js';

/**
 * `deny`: refuse the traffic. On HTTP it answers `status_code` (default 403) with the edge's error
 * page (ERR_BURROW_POLICY_DENIED), so the client learns why; in on_tcp_connect it closes the
 * connection, so it takes no config there.
 * @example { type: 'deny', config: { status_code: 404 } }
 */
export const denyAction: ActionSpec = {
  type: 'deny',
  phases: ['on_tcp_connect', 'on_http_request'],
  termination: 'always',
  configKeys: ['status_code'],
  compile(config, ctx) {
    if (ctx.phase === 'on_tcp_connect') {
      if (config.has('status_code')) {
        config.fail(
          'status_code',
          'applies only in on_http_request; in on_tcp_connect deny closes the connection. Remove status_code.',
        );
      }
      return {
        alwaysTerminates: true,
        run(c) {
          c.event('denied', 'connection denied: closed');
          return CLOSE;
        },
      };
    }
    const status = config.integer('status_code', { min: 400, max: 599 }) ?? 403;
    const answer: Terminal = Object.freeze({
      kind: 'respond',
      status,
      headers: Object.freeze({}),
      body: '',
      refusal: Object.freeze({
        code: CODES.policyDenied,
        title: STATUS_CODES[status] ?? 'Denied',
        message: "The endpoint's traffic policy denied this request (a deny rule).",
      }),
    });
    return {
      alwaysTerminates: true,
      run(c) {
        c.event('denied', `request denied with ${status}`, { status_code: status });
        return answer;
      },
    };
  },
};
