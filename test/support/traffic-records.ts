import type { TrafficLog } from '../../src/edge/metrics/traffic-log.js';

/** What `TrafficLog.add` takes: a request as the traffic tap records it. */
export type NewTrafficRecord = Parameters<TrafficLog['add']>[0];

/**
 * A request for the traffic inspector's tests: `GET /` to `host` over plain HTTP from
 * 198.51.100.4 on tunnel `tn_1`, no headers, not yet answered; `fields` replace any of that.
 * @example log.add(trafficRequest('a.test', { requestHeaders: ['Cookie', 'sid=1'], status: 200 }))
 */
export function trafficRequest(
  host: string,
  fields: Partial<NewTrafficRecord> = {},
): NewTrafficRecord {
  return {
    host,
    tunnelId: 'tn_1',
    scheme: 'http',
    startedAt: Date.now(),
    method: 'GET',
    path: '/',
    clientIp: '198.51.100.4',
    requestHeaders: [],
    status: undefined,
    responseHeaders: [],
    durationMs: undefined,
    requestBody: undefined,
    responseBody: undefined,
    replayOf: undefined,
    ...fields,
  };
}
