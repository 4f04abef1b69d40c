/**
 * What an edge node answers about its own traffic inspector when the cluster's inspector asks
 * (cluster-traffic.ts): a page of summaries, one record, a replay through this node's ingress,
 * and the per-host switches. Records leave as they are kept, credentials already redacted.
 */
import { BurrowError, CODES } from '../../core/errors.js';
import { PER_HOST_CAP, type TrafficRecord } from '../metrics/traffic-log.js';
import type { TrafficInspector } from '../metrics/traffic-replay.js';
import { logFacts, summarize, type LogFacts } from '../metrics/traffic-view.js';
import type { NodeQuery } from './node-link-queries.js';
import { recordToWire, type WireSummary } from './traffic-wire.js';

/** `traffic.list`: newest first, after the cursor when there is one. */
export interface ListQuery extends NodeQuery {
  kind: 'traffic.list';
  host?: string | undefined;
  /** The record the page starts after: its node, sequence and start time. */
  after?: { node: string; seq: number; startedAt: number } | undefined;
  limit: number;
}

/** The answer to `traffic.list`. */
export interface ListReply extends LogFacts {
  records: WireSummary[];
}

const HOST_RE = /^[A-Za-z0-9.*-]{1,255}$/;
const LOCAL_ID = /^tr_\d{1,15}$/;

function badQuery(what: string): BurrowError {
  return new BurrowError(CODES.nodeLinkProtocol, 400, `the traffic query's ${what} is not valid`);
}

function hostOf(query: NodeQuery): string {
  if (typeof query.host !== 'string' || !HOST_RE.test(query.host)) throw badQuery('host');
  return query.host;
}

function recordOf(local: TrafficInspector, query: NodeQuery): TrafficRecord | undefined {
  if (typeof query.id !== 'string' || !LOCAL_ID.test(query.id)) throw badQuery('id');
  return local.log.get(query.id);
}

/** Whether `r` comes after the cursor, in the order the merged list follows. */
function afterCursor(r: TrafficRecord, self: string, after: NonNullable<ListQuery['after']>) {
  if (after.node === self) return r.seq > after.seq;
  return r.startedAt > after.startedAt || (r.startedAt === after.startedAt && self > after.node);
}

function readCursor(value: unknown): ListQuery['after'] {
  if (value === undefined || value === null) return undefined;
  const c = value as Partial<NonNullable<ListQuery['after']>>;
  if (typeof c.node !== 'string' || typeof c.seq !== 'number' || typeof c.startedAt !== 'number') {
    throw badQuery('after');
  }
  return { node: c.node, seq: c.seq, startedAt: c.startedAt };
}

function list(local: TrafficInspector, self: string, query: NodeQuery): ListReply {
  const { log } = local;
  const host = query.host === undefined ? undefined : hostOf(query);
  const limit = Math.min(Math.max(Number(query.limit) || PER_HOST_CAP, 1), PER_HOST_CAP);
  const after = readCursor(query.after);
  // Without a cursor the log pages itself; with one from another node, by time, over everything.
  const records = after
    ? log
        .list({ host, limit: Number.MAX_SAFE_INTEGER })
        .filter((r) => afterCursor(r, self, after))
        .slice(0, limit)
    : log.list({ host, limit });
  return {
    records: records.map((r) => {
      const { node: _node, ...summary } = summarize(r, undefined);
      return { ...summary, seq: r.seq };
    }),
    ...logFacts(log),
  };
}

/**
 * This node's answer to a `traffic.*` query, `self` being its node id.
 * @example node.serve('traffic', (query) => answerTrafficQuery(edge.traffic, node.id, query));
 */
export async function answerTrafficQuery(
  local: TrafficInspector,
  self: string,
  query: NodeQuery,
): Promise<unknown> {
  switch (query.kind) {
    case 'traffic.list':
      return list(local, self, query);
    case 'traffic.get': {
      const record = recordOf(local, query);
      return record ? recordToWire(record) : null;
    }
    case 'traffic.replay': {
      const record = recordOf(local, query);
      if (!record) {
        throw new Error(
          `request ${String(query.id)} is no longer kept; list the traffic again and replay a newer one`,
        );
      }
      return local.replay(record);
    }
    case 'traffic.capture':
      if (typeof query.enabled !== 'boolean') throw badQuery('enabled');
      local.log.setCapture(hostOf(query), query.enabled);
      return true;
    case 'traffic.credentials':
      if (typeof query.shown !== 'boolean') throw badQuery('shown');
      local.log.setCredentialsShown(hostOf(query), query.shown);
      return true;
    default:
      throw new BurrowError(CODES.nodeLinkProtocol, 501, `no traffic query ${query.kind}`);
  }
}
