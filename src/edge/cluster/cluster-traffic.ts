/**
 * One traffic inspector for the whole cluster. Each edge node keeps the requests it served in its
 * own memory (metrics/traffic-log.ts), as a single process does; the node that serves the API asks
 * every edge node over the node links (node-link-queries.ts) and merges what they answer. Nothing
 * is written to PostgreSQL: a request costs no database write, secrets stay redacted where they
 * were recorded, and a replay runs on the node that holds the record, through its own ingress,
 * which reaches the agent wherever it is.
 *
 * Ids name the node: `tr_<node>_<n>` is record `tr_<n>` of node `<node>`. Every question to a
 * node is bounded (DEFAULT_ASK_MS; a replay waits for its answer), and a node that does not answer
 * in time is named in the reply (`unanswered`) instead of holding it up.
 */
import { BurrowError, CODES } from '../../core/errors.js';
import { PER_HOST_CAP, HOST_CAP, type TrafficRecord } from '../metrics/traffic-log.js';
import type { ReplayResult, TrafficInspector } from '../metrics/traffic-replay.js';
import {
  LOCAL_TRAFFIC_ID,
  localTrafficView,
  type NodeMiss,
  type TrafficListFilter,
  type TrafficListing,
  type TrafficSummary,
  type TrafficView,
} from '../metrics/traffic-view.js';
import type { NodeQuery } from './node-link-queries.js';
import type { NodePeer } from './node-links.js';
import {
  recordFromWire,
  stringsFromWire,
  summaryFromWire,
  type WireSummary,
} from './traffic-wire.js';
import { answerTrafficQuery, type ListQuery, type ListReply } from './traffic-answers.js';

/** How long a list, a lookup or a switch waits for each node. */
export const DEFAULT_ASK_MS = 2000;
/** How long a replay waits for the holding node: the replay's own 30 s, and some. */
export const DEFAULT_REPLAY_MS = 35_000;

/** The part of the cluster node this view asks through (ClusterNode). */
export interface TrafficPeers {
  readonly id: string;
  linkedPeers(): NodePeer[];
  ask(peer: NodePeer, query: NodeQuery, timeoutMs: number): Promise<unknown>;
}

export interface ClusterTrafficOptions {
  node: TrafficPeers;
  /** This node's own inspector; undefined on an API-only node. */
  local: TrafficInspector | undefined;
  askMs?: number;
  replayMs?: number;
}

const CLUSTER_ID = /^tr_([A-Za-z0-9][A-Za-z0-9_-]{0,62})_(\d+)$/;

/**
 * `tr_<node>_<n>` for record `tr_<n>` of `node`.
 * @example clusterTrafficId('edge-b', 'tr_12') // 'tr_edge-b_12'
 */
export function clusterTrafficId(node: string, localId: string): string {
  return `tr_${node}_${localId.slice(3)}`;
}

/** `replayOf` as the cluster names it: a node's own `tr_<n>` qualified with that node. */
function clusterReplayOf(node: string, replayOf: string | undefined): string | undefined {
  return replayOf && LOCAL_TRAFFIC_ID.test(replayOf) ? clusterTrafficId(node, replayOf) : replayOf;
}

/**
 * The node and its own id (`tr_<n>`) that a cluster id names; a bare `tr_<n>` is `self`'s.
 * @example parseClusterTrafficId('tr_edge-b_12', 'edge-a') // { node: 'edge-b', localId: 'tr_12', seq: 12 }
 */
export function parseClusterTrafficId(
  id: string,
  self: string,
): { node: string; localId: string; seq: number } | undefined {
  const local = LOCAL_TRAFFIC_ID.exec(id);
  if (local) return { node: self, localId: id, seq: Number(local[1]) };
  const match = CLUSTER_ID.exec(id);
  if (!match) return undefined;
  return { node: match[1]!, localId: `tr_${match[2]!}`, seq: Number(match[2]) };
}

/** Newest first: by start time, then node, then sequence (the order `after` follows too). */
function newestFirst(a: TrafficSummary & { seq: number }, b: TrafficSummary & { seq: number }) {
  if (a.startedAt !== b.startedAt) return b.startedAt - a.startedAt;
  if (a.node !== b.node) return (b.node ?? '') < (a.node ?? '') ? -1 : 1;
  return b.seq - a.seq;
}

function missOf(node: string, err: unknown): NodeMiss {
  return { node, message: err instanceof Error ? err.message : String(err) };
}

/** Add `more` to `into`, without repeats, keeping the order first seen. */
function union(into: string[], more: readonly string[]): void {
  for (const s of more) if (!into.includes(s)) into.push(s);
}

/**
 * The inspector over every edge node of the cluster, for the API of `options.node`.
 * @example const view = clusterTrafficView({ node: member.node, local: edge.traffic });
 */
export function clusterTrafficView(options: ClusterTrafficOptions): TrafficView {
  const { node, local } = options;
  const askMs = options.askMs ?? DEFAULT_ASK_MS;
  const replayMs = options.replayMs ?? DEFAULT_REPLAY_MS;

  /** `query` answered by this node and every linked peer; what failed, by node. */
  async function everyNode(query: NodeQuery): Promise<{
    answers: Array<{ node: string; value: unknown }>;
    unanswered: NodeMiss[];
  }> {
    const peers = node.linkedPeers();
    const asked = await Promise.allSettled([
      ...(local ? [answerTrafficQuery(local, node.id, query)] : []),
      ...peers.map((peer) => node.ask(peer, query, askMs)),
    ]);
    const names = [...(local ? [node.id] : []), ...peers.map((p) => p.id)];
    const answers: Array<{ node: string; value: unknown }> = [];
    const unanswered: NodeMiss[] = [];
    asked.forEach((result, i) => {
      if (result.status === 'fulfilled') answers.push({ node: names[i]!, value: result.value });
      else unanswered.push(missOf(names[i]!, result.reason));
    });
    return { answers, unanswered };
  }

  /** Record `localId` of `holder`: read here, or asked of its node. */
  async function recordOn(holder: string, localId: string): Promise<TrafficRecord | undefined> {
    if (holder === node.id) return local?.log.get(localId);
    const peer = node.linkedPeers().find((p) => p.id === holder);
    if (!peer) return undefined; // the node left the cluster, and its memory with it
    const value = await node.ask(peer, { kind: 'traffic.get', id: localId }, askMs);
    return value === null ? undefined : recordFromWire(value, holder);
  }

  /** The cursor `after` names, as the nodes filter by it. */
  async function cursor(after: string): Promise<ListQuery['after']> {
    const named = parseClusterTrafficId(after, node.id);
    if (!named) return undefined;
    const record = await recordOn(named.node, named.localId);
    if (!record) {
      throw new BurrowError(
        CODES.invalidValue,
        400,
        `The request ${after} named by after is no longer kept, or its node did not say: list without after, and page from the newest id it returns.`,
      );
    }
    return { node: named.node, seq: named.seq, startedAt: record.startedAt };
  }

  async function list(filter: TrafficListFilter): Promise<TrafficListing> {
    const limit = Math.min(filter.limit, PER_HOST_CAP);
    const query: ListQuery = {
      kind: 'traffic.list',
      host: filter.host,
      after: filter.after ? await cursor(filter.after) : undefined,
      limit,
    };
    const { answers, unanswered } = await everyNode(query);
    const merged: Array<WireSummary & { node: string }> = [];
    const listing: TrafficListing = {
      available: local !== undefined || node.linkedPeers().length > 0,
      requests: [],
      hosts: [],
      capturedHosts: [],
      credentialsShownHosts: [],
      redactedHeaders: [],
      unanswered,
    };
    for (const { node: from, value } of answers) {
      try {
        const reply = value as Partial<ListReply> | null;
        const items = Array.isArray(reply?.records) ? reply.records.slice(0, limit) : [];
        const summaries = items.map((item) => ({ ...summaryFromWire(item, from), node: from }));
        merged.push(...summaries);
        union(listing.hosts, stringsFromWire(reply?.hosts, from, 'hosts', HOST_CAP));
        union(listing.capturedHosts, stringsFromWire(reply?.capturedHosts, from, 'hosts', 1000));
        union(
          listing.credentialsShownHosts,
          stringsFromWire(reply?.credentialsShownHosts, from, 'hosts', 1000),
        );
        union(
          listing.redactedHeaders,
          stringsFromWire(reply?.redactedHeaders, from, 'headers', 1000),
        );
      } catch (err) {
        unanswered.push(missOf(from, err));
      }
    }
    listing.requests = merged
      .sort(newestFirst)
      .slice(0, limit)
      .map(({ seq: _seq, ...summary }) => ({
        ...summary,
        id: clusterTrafficId(summary.node, summary.id),
        replayOf: clusterReplayOf(summary.node, summary.replayOf),
      }));
    listing.capturedHosts.sort();
    listing.credentialsShownHosts.sort();
    listing.redactedHeaders.sort();
    return listing;
  }

  return {
    list,
    async get(id) {
      const named = parseClusterTrafficId(id, node.id);
      if (!named) return undefined;
      const record = await recordOn(named.node, named.localId);
      if (!record) return undefined;
      return {
        ...record,
        id: clusterTrafficId(named.node, record.id),
        replayOf: clusterReplayOf(named.node, record.replayOf),
      };
    },
    async replay(record): Promise<ReplayResult> {
      const named = parseClusterTrafficId(record.id, node.id);
      if (!named) throw new Error(`${record.id} names no request`);
      if (named.node === node.id) {
        const own = local?.log.get(named.localId);
        if (!local || !own) {
          throw new Error(
            'the request is no longer kept; list the traffic again and replay a newer one',
          );
        }
        return local.replay(own);
      }
      const peer = node.linkedPeers().find((p) => p.id === named.node);
      if (!peer) throw new Error(`node ${named.node}, which holds the request, left the cluster`);
      const value = await node.ask(peer, { kind: 'traffic.replay', id: named.localId }, replayMs);
      const result = value as Partial<ReplayResult> | null;
      if (typeof result?.status !== 'number' || !Array.isArray(result.omittedHeaders)) {
        throw new Error(`node ${named.node} answered the replay with something unreadable`);
      }
      return {
        status: result.status,
        omittedHeaders: stringsFromWire(result.omittedHeaders, named.node, 'headers', 100),
      };
    },
    // A switch goes to every node; the reply names who did not hear of it.
    setCapture: async (host, enabled) =>
      (await everyNode({ kind: 'traffic.capture', host, enabled })).unanswered,
    setCredentialsShown: async (host, shown) =>
      (await everyNode({ kind: 'traffic.credentials', host, shown })).unanswered,
  };
}

/**
 * The view one process's API uses: the cluster's when it is a node of one, else its own.
 * @example online.trafficView = trafficViewFor(edge.cluster?.node, edge.traffic);
 */
export function trafficViewFor(
  node: TrafficPeers | undefined,
  local: TrafficInspector | undefined,
): TrafficView | undefined {
  if (node) return clusterTrafficView({ node, local });
  return local && localTrafficView(local);
}
