import type { TrafficInspector } from '../edge/metrics/traffic-replay.js';
import type { TrafficSeries } from '../edge/metrics/traffic-series.js';
import type { TrafficView } from '../edge/metrics/traffic-view.js';
import type { TunnelRegistry } from '../edge/registry/tunnel-registry.js';
import type { PolicyEventSource } from '../policy/events.js';
import type { Repositories } from '../store/index.js';
import type { Uris } from './uris.js';

/**
 * Live state the API shows but does not own: online tunnels and sessions. The edge fills it in;
 * an API-only process sees nothing online.
 */
export interface OnlineState {
  /** Ids of online tunnels whose labels are a superset of `labels`. */
  tunnelsMatching(labels: Record<string, string>): string[];
  /** Traffic policy events by owner (`/edges/{tcp|tls}/{id}/traffic_policy/events`); absent: none. */
  policyEvents?: PolicyEventSource | undefined;
  /** The edge's online sessions and tunnels (`/tunnel_sessions`, `/tunnels`, `/endpoints`); absent: none. */
  registry?: TunnelRegistry | undefined;
  /** The edge's traffic inspector (`/traffic/...`, the dashboard's Traffic); absent: none. */
  traffic?: TrafficInspector | undefined;
  /**
   * What `/traffic/...` reads when set, instead of `traffic` alone: in a cluster, every edge
   * node's inspector (edge/cluster/cluster-traffic.ts).
   */
  trafficView?: TrafficView | undefined;
  /** The edge's traffic over the last hour and day (`/metrics/series`, the charts); absent: none. */
  series?: TrafficSeries | undefined;
  /** Called after a credential is deleted or a bot user changed, so the edge re-checks sessions now. */
  credentialsChanged?: (() => void) | undefined;
  /**
   * A change edges read at their reload (`edges`, with the ids of the backends, IP policies or CAs
   * changed when the call names them), a served certificate changed, or a vault or secret changed
   * (`secrets`: the edge reloads the values its policies read).
   */
  configChanged?: ((topic: ConfigTopic, inputs?: readonly string[]) => void) | undefined;
  /** This process's node id in a cluster (the sessions' `node_id`); absent on a single node. */
  nodeId?: string | undefined;
}

/** What a configuration notice is about (src/api/change-notices.ts). */
export type ConfigTopic = 'edges' | 'certificates' | 'secrets' | 'events';

export const NOTHING_ONLINE: OnlineState = {
  tunnelsMatching: () => [],
};

/** What every route plugin receives. */
export interface ApiContext {
  repos: Repositories;
  uris: Uris;
  online: OnlineState;
}
