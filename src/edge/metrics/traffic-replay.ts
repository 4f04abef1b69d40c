import { request } from 'node:http';
import { parseHostPort } from '../../core/host-port.js';
import { HOP_BY_HOP_HEADERS } from '../../core/http-framing.js';
import {
  BODY_CAP,
  headerPairs,
  REPLAY_HEADER,
  type TrafficLog,
  type TrafficRecord,
} from './traffic-log.js';

/**
 * Headers a replay must not copy: the connection's own (hop-by-hop), and the body's framing, which
 * Node sets for the body replayed.
 */
const SKIPPED: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'content-length',
  'trailer',
  REPLAY_HEADER,
]);

/** Why a record cannot be replayed, or undefined when it can. */
export function replayRefusal(record: TrafficRecord): string | undefined {
  const sentBody = headerPairs(record.requestHeaders).some(
    ([k, v]) =>
      (k.toLowerCase() === 'content-length' && v !== '0') ||
      k.toLowerCase() === 'transfer-encoding',
  );
  if (!sentBody) return undefined;
  if (!record.requestBody)
    return 'this request had a body that was not captured; switch capture on for its endpoint to replay requests with bodies';
  if (record.requestBody.truncated)
    return `this request body was larger than the ${BODY_CAP / 1024} KiB capture limit, so it cannot be replayed exactly; send it again from its client instead`;
  return undefined;
}

/** The traffic inspector the API serves: the log, and replay through this edge's own ingress. */
export interface TrafficInspector {
  log: TrafficLog;
  /** Send `record`'s request again through the HTTP ingress; resolves with the answer's status. */
  replay(record: TrafficRecord): Promise<{ status: number }>;
}

/**
 * A {@link TrafficInspector} over `log` that replays to the HTTP ingress at `httpAddress`, so a
 * replay goes through routing and traffic policy exactly as the original did.
 * @example const inspector = trafficInspector(log, '127.0.0.1:8080'); await inspector.replay(record);
 */
export function trafficInspector(log: TrafficLog, httpAddress: string): TrafficInspector {
  const target = parseHostPort(httpAddress, { minPort: 1 });
  // A listener on every interface is reached over loopback.
  const host = target?.host === '0.0.0.0' || target?.host === '::' ? '127.0.0.1' : target?.host;
  return {
    log,
    replay(record) {
      const refusal = replayRefusal(record);
      if (refusal) return Promise.reject(new Error(refusal));
      const headers: Array<[string, string]> = headerPairs(record.requestHeaders).filter(
        ([k]) => !SKIPPED.has(k.toLowerCase()),
      );
      headers.push([REPLAY_HEADER, record.id]);
      const body = record.requestBody?.bytes ?? Buffer.alloc(0);
      if (body.length > 0) headers.push(['content-length', String(body.length)]);
      return new Promise((resolve, reject) => {
        const req = request(
          {
            host,
            port: target?.port,
            method: record.method,
            path: record.path,
            headers: headers.flat(),
            timeout: 30_000,
          },
          (res) => {
            res.resume();
            res.once('end', () => resolve({ status: res.statusCode ?? 0 }));
            res.once('error', reject);
          },
        );
        req.once('timeout', () => req.destroy(new Error('the replay got no answer in 30 s')));
        req.once('error', reject);
        req.end(body);
      });
    },
  };
}
