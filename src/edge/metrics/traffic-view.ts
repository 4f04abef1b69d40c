/**
 * The traffic inspector as the API reads it: a list of summaries, one record, replay and the
 * per-host switches, all asynchronous, so that the same routes serve one process's log
 * ({@link localTrafficView}) or a whole cluster's, gathered over the node links
 * (cluster/cluster-traffic.ts).
 */
import { PER_HOST_CAP, type TrafficLog, type TrafficRecord } from './traffic-log.js';
import type { ReplayResult, TrafficInspector } from './traffic-replay.js';

/** Characters of a path a list shows; the record itself (`GET /traffic/{id}`) has it whole. */
export const SUMMARY_PATH_CAP = 2048;

/** What a list shows of one record: no headers, no bodies. */
export type TrafficSummary = Pick<
  TrafficRecord,
  | 'host'
  | 'tunnelId'
  | 'scheme'
  | 'startedAt'
  | 'method'
  | 'path'
  | 'clientIp'
  | 'status'
  | 'durationMs'
  | 'replayOf'
  | 'credentialsShown'
> & {
  /** `tr_<n>` on one process; `tr_<node>_<n>` in a cluster. */
  id: string;
  /** The node that served it, in a cluster. */
  node: string | undefined;
  /** Whether bodies were captured. */
  captured: boolean;
};

/** A node that did not answer a question about the whole cluster, and why. */
export interface NodeMiss {
  node: string;
  message: string;
}

/** One page of the list, and what the page's nodes know besides. */
export interface TrafficListing {
  /** False when nothing here or in the cluster runs an edge (an API-only process alone). */
  available: boolean;
  requests: TrafficSummary[];
  hosts: string[];
  capturedHosts: string[];
  credentialsShownHosts: string[];
  redactedHeaders: string[];
  /** Nodes that were asked and did not answer in time: their requests are missing. */
  unanswered: NodeMiss[];
}

export interface TrafficListFilter {
  host?: string | undefined;
  /** An id: only requests recorded after that one. */
  after?: string | undefined;
  limit: number;
}

/** What the inspector routes (src/api/traffic.ts) read and change. */
export interface TrafficView {
  /** Newest first, at most `filter.limit`. */
  list(filter: TrafficListFilter): Promise<TrafficListing>;
  /** The record `id` names, with that id; undefined when nobody keeps it. */
  get(id: string): Promise<TrafficRecord | undefined>;
  /** Send a record {@link get} returned again, through the ingress of the node that holds it. */
  replay(record: TrafficRecord): Promise<ReplayResult>;
  /** Switch body capture for `host`; resolves with the nodes that did not hear of it. */
  setCapture(host: string, enabled: boolean): Promise<NodeMiss[]>;
  /** Show (or redact again) `host`'s credentials; resolves with the nodes that did not hear of it. */
  setCredentialsShown(host: string, shown: boolean): Promise<NodeMiss[]>;
}

/**
 * A record as a list shows it, its id and replay link as given (a cluster qualifies them).
 * @example summarize(log.get('tr_1')!, undefined).captured
 */
export function summarize(
  record: TrafficRecord,
  node: string | undefined,
  id = record.id,
  replayOf = record.replayOf,
): TrafficSummary {
  return {
    id,
    node,
    host: record.host,
    tunnelId: record.tunnelId,
    scheme: record.scheme,
    startedAt: record.startedAt,
    method: record.method,
    path: record.path.slice(0, SUMMARY_PATH_CAP),
    clientIp: record.clientIp,
    status: record.status,
    durationMs: record.durationMs,
    replayOf,
    captured: record.requestBody !== undefined,
    credentialsShown: record.credentialsShown,
  };
}

/** What one log knows besides its records: the list's host and header lists. */
export type LogFacts = Pick<
  TrafficListing,
  'hosts' | 'capturedHosts' | 'credentialsShownHosts' | 'redactedHeaders'
>;

/**
 * `log`'s hosts, switched hosts and redacted header names, as a list page shows them.
 * @example logFacts(edge.traffic.log).capturedHosts
 */
export function logFacts(log: TrafficLog): LogFacts {
  return {
    hosts: log.hosts(),
    capturedHosts: log.capturedHosts(),
    credentialsShownHosts: log.credentialsShownHosts(),
    redactedHeaders: [...log.redactor.names].sort(),
  };
}

/** One process's own id, `tr_<n>` (traffic-log.ts); a cluster's names the node too. */
export const LOCAL_TRAFFIC_ID = /^tr_(\d+)$/;

/**
 * The view of one process's own log, as the API always read it: ids `tr_<n>`, `after` by
 * sequence.
 * @example const view = localTrafficView(edge.traffic); await view.list({ limit: 100 });
 */
export function localTrafficView(inspector: TrafficInspector): TrafficView {
  const { log } = inspector;
  return {
    list(filter) {
      const afterSeq = filter.after
        ? Number(LOCAL_TRAFFIC_ID.exec(filter.after)?.[1] ?? 0)
        : undefined;
      const records = log.list({
        host: filter.host,
        afterSeq,
        limit: Math.min(filter.limit, PER_HOST_CAP),
      });
      return Promise.resolve({
        available: true,
        requests: records.map((r) => summarize(r, undefined)),
        ...logFacts(log),
        unanswered: [],
      });
    },
    get: (id) => Promise.resolve(log.get(id)),
    replay: (record) => inspector.replay(record),
    setCapture(host, enabled) {
      log.setCapture(host, enabled);
      return Promise.resolve([]);
    },
    setCredentialsShown(host, shown) {
      log.setCredentialsShown(host, shown);
      return Promise.resolve([]);
    },
  };
}
