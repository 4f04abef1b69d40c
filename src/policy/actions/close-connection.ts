import { CLOSE, type ActionSpec } from './types.js';

/**
 * `close-connection`: drop the connection without answering (HTTP: no response at all).
 * @example { type: 'close-connection' }
 */
export const closeConnectionAction: ActionSpec = {
  type: 'close-connection',
  phases: ['on_tcp_connect', 'on_http_request'],
  termination: 'always',
  configKeys: [],
  compile() {
    return {
      alwaysTerminates: true,
      run(c) {
        c.event('closed', 'connection closed by policy');
        return CLOSE;
      },
    };
  },
};
