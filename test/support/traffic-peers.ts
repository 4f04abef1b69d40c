import { BurrowError, CODES } from '../../src/core/errors.js';
import type { TrafficPeers } from '../../src/edge/cluster/cluster-traffic.js';
import type { NodeQuery } from '../../src/edge/cluster/node-link-queries.js';
import { answerTrafficQuery } from '../../src/edge/cluster/traffic-answers.js';
import { TrafficLog } from '../../src/edge/metrics/traffic-log.js';
import type { ReplayResult, TrafficInspector } from '../../src/edge/metrics/traffic-replay.js';

/**
 * An edge node's traffic inspector whose replays are only noted (by the node's own ids).
 * @example const b = notingInspector(); b.log.add(trafficRequest('b.test')); b.replayed // []
 */
export function notingInspector(): TrafficInspector & { replayed: string[] } {
  const replayed: string[] = [];
  return {
    log: new TrafficLog(),
    replayed,
    replay: (record): Promise<ReplayResult> => {
      replayed.push(record.id);
      return Promise.resolve({ status: 200, omittedHeaders: ['authorization'] });
    },
  };
}

/**
 * Node `self` of a cluster whose other edge nodes are `peers`, asked as over a node link: the
 * query and the reply go through JSON, as on the wire. A peer in `down` fails as a node that does
 * not answer in time does (ERR_BURROW_NODE_CONNECT_TIMEOUT naming it).
 * @example clusterTrafficView({ node: fakeTrafficPeers({ 'edge-b': b }).node, local: undefined })
 */
export function fakeTrafficPeers(
  peers: Record<string, TrafficInspector>,
  down: ReadonlySet<string> = new Set(),
  self = 'edge-a',
): { node: TrafficPeers; asked: string[] } {
  const asked: string[] = [];
  const node: TrafficPeers = {
    id: self,
    linkedPeers: () => Object.keys(peers).map((id) => ({ id, address: `${id}:7443` })),
    ask: async (peer, query: NodeQuery) => {
      asked.push(`${peer.id} ${query.kind}`);
      if (down.has(peer.id)) {
        throw new BurrowError(
          CODES.nodeConnectTimeout,
          504,
          `node ${peer.id}: no reply within 2000 ms`,
          { node: peer.id },
        );
      }
      const wire = JSON.parse(JSON.stringify(query)) as NodeQuery;
      const value = await answerTrafficQuery(peers[peer.id]!, peer.id, wire);
      return JSON.parse(JSON.stringify(value)) as unknown;
    },
  };
  return { node, asked };
}
