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

/** What a replay got back, and which of the request's headers it could not send. */
export interface ReplayResult {
  status: number;
  /**
   * Lower-case names of headers the original request had but the replay left out because the
   * inspector redacted them (their values were never kept); empty when its host showed credentials.
   */
  omittedHeaders: string[];
}

/** The traffic inspector the API serves: the log, and replay through this edge's own ingress. */
export interface TrafficInspector {
  log: TrafficLog;
  /**
   * Send `record`'s request again through the HTTP ingress; resolves with the answer's status and
   * the redacted headers it left out.
   */
  replay(record: TrafficRecord): Promise<ReplayResult>;
}

/**
 * `record`'s headers as a replay sends them: without the connection's own and the framing, and,
 * when they were redacted, without the credential headers, which a replay sends as absent rather
 * than as the placeholder text the inspector kept.
 */
function replayHeaders(
  log: TrafficLog,
  record: TrafficRecord,
): { headers: Array<[string, string]>; omittedHeaders: string[] } {
  const headers: Array<[string, string]> = [];
  const omitted = new Set<string>();
  for (const [name, value] of headerPairs(record.requestHeaders)) {
    const lower = name.toLowerCase();
    if (SKIPPED.has(lower)) continue;
    if (!record.credentialsShown && log.redactor.redacts(name)) omitted.add(lower);
    else headers.push([name, value]);
  }
  return { headers, omittedHeaders: [...omitted] };
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
      const { headers, omittedHeaders } = replayHeaders(log, record);
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
            res.once('end', () => resolve({ status: res.statusCode ?? 0, omittedHeaders }));
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
