/**
 * Options of a node in a cluster (several `burrow server` processes on one PostgreSQL; see
 * docs/operations.md "Several nodes"). Read like every server option: flag, environment, file.
 */
import { isIP } from 'node:net';
import { parseHostPort } from './host-port.js';

export interface ClusterConfig {
  /** This node's id; empty: generated once and kept in the data folder (`node-id`). */
  nodeId: string;
  /** host:port other nodes' links connect to (mutual TLS); port 0 picks a free one. */
  nodeListen: string;
  /** host:port other nodes dial; empty: the bound --node-listen address. */
  nodeAdvertise: string;
  /** How often this node writes its heartbeat (ms). */
  heartbeatMs: number;
  /** A node whose last heartbeat is older than this is gone; its agents' rows are cleared (ms). */
  timeoutMs: number;
  /**
   * How often edges and cloud endpoints are reloaded whole from the store (ms; 0: never). Changes
   * arrive as events; this only heals a lost notice.
   */
  reconcileMs: number;
}

/** One cluster option as the CLI, environment and config file see it. */
export interface ClusterOptionSpec {
  name: string;
  description: string;
  default: string;
}

export const CLUSTER_OPTIONS: readonly ClusterOptionSpec[] = [
  {
    name: 'node-id',
    description:
      "this node's id in a cluster (letters, digits, '-', '_'; default: generated once and kept in the data folder)",
    default: '',
  },
  {
    name: 'node-listen',
    description:
      'node-to-node links (mutual TLS) host:port, used with a postgres:// --database; port 0 picks one',
    default: '127.0.0.1:0',
  },
  {
    name: 'node-advertise',
    description:
      'host:port other nodes dial to reach this one (default: the --node-listen address)',
    default: '',
  },
  {
    name: 'node-heartbeat-ms',
    description: 'how often a node records that it is alive',
    default: '1000',
  },
  {
    name: 'node-timeout-ms',
    description:
      "a node silent this long is gone: its agents' sessions and tunnels are cleared (they reconnect elsewhere)",
    default: '5000',
  },
  {
    name: 'store-reconcile-ms',
    description:
      "how often the edge reloads every edge and cloud endpoint from the store as a safety net (changes arrive as events at once: this process's writes, and other nodes' by PostgreSQL notices); 0 turns it off",
    default: '300000',
  },
];

/** Node ids become certificate names (a node certificate's CN) and log fields: keep them plain. */
const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/**
 * Why `nodeId` cannot name a node, or undefined when it can: the one rule for --node-id, the
 * cluster CA's node certificates and the peers a node link accepts.
 * @example nodeIdProblem('edge a') // "must be 1-63 letters, digits, '-' or '_', …"
 */
export function nodeIdProblem(nodeId: string): string | undefined {
  return NODE_ID.test(nodeId)
    ? undefined
    : "must be 1-63 letters, digits, '-' or '_', starting with a letter or digit";
}

/**
 * The cluster options from `raw` (the server's flag, environment and file lookup).
 * @example parseClusterConfig((name, def) => def, (n, r) => new Error(`${n}: ${r}`)).heartbeatMs // 1000
 */
export function parseClusterConfig(
  raw: (name: string, def: string) => string,
  fail: (name: string, rule: string) => Error,
): ClusterConfig {
  const get = (name: string): string => {
    const spec = CLUSTER_OPTIONS.find((o) => o.name === name)!;
    return raw(name, spec.default);
  };
  const nodeId = get('node-id');
  const idProblem = nodeId === '' ? undefined : nodeIdProblem(nodeId);
  if (idProblem) throw fail('node-id', `'${nodeId}' ${idProblem}`);
  const nodeListen = get('node-listen');
  const listen = parseHostPort(nodeListen);
  if (!listen) throw fail('node-listen', `'${nodeListen}' must be host:port, e.g. 10.0.0.5:7443`);
  const nodeAdvertise = get('node-advertise');
  if (nodeAdvertise !== '' && !parseHostPort(nodeAdvertise, { minPort: 1 })) {
    throw fail('node-advertise', `'${nodeAdvertise}' must be host:port, e.g. 10.0.0.5:7443`);
  }
  // 0.0.0.0, or :: however written (::0, 0:0:0:0:0:0:0:0): every address, none to dial.
  const family = isIP(listen.host);
  const unspecified =
    family === 4 ? listen.host === '0.0.0.0' : family === 6 && /^[0:]+$/.test(listen.host);
  if (unspecified && nodeAdvertise === '') {
    throw fail(
      'node-advertise',
      `required with --node-listen ${nodeListen} (every address): give the host:port the other nodes dial, e.g. 10.0.0.5:7443`,
    );
  }
  const ms = (name: string, min: number, max: number): number => {
    const text = get(name);
    const value = Number(text);
    if (!/^\d+$/.test(text) || value < min || value > max) {
      throw fail(name, `'${text}' must be a whole number of milliseconds from ${min} to ${max}`);
    }
    return value;
  };
  const heartbeatMs = ms('node-heartbeat-ms', 100, 60_000);
  const timeoutMs = ms('node-timeout-ms', 500, 600_000);
  if (timeoutMs < 2 * heartbeatMs) {
    throw fail(
      'node-timeout-ms',
      `${timeoutMs} must be at least twice --node-heartbeat-ms (${heartbeatMs}), or one late beat ends a live node`,
    );
  }
  const reconcileText = get('store-reconcile-ms');
  const reconcileMs = Number(reconcileText);
  if (
    !/^\d+$/.test(reconcileText) ||
    (reconcileMs !== 0 && reconcileMs < 1000) ||
    reconcileMs > 86_400_000
  ) {
    throw fail(
      'store-reconcile-ms',
      `'${reconcileText}' must be 0 (no periodic reload) or a whole number of milliseconds from 1000 to 86400000`,
    );
  }
  return { nodeId, nodeListen, nodeAdvertise, heartbeatMs, timeoutMs, reconcileMs };
}
