/**
 * What a process needs to be a node of a cluster: its id, the notice channel, the node links
 * (listening on edge roles, dialling only on an API-only node) and the ClusterNode over them. The caller starts the node once the agent listener
 * is up (its policies are where other nodes' tunnels get theirs).
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { ClusterConfig } from '../../core/cluster-config.js';
import type { Logger } from '../../core/logger.js';
import { StoreNotifications, type Repositories } from '../../store/index.js';
import { publishExclusive } from '../certificates/local-ca.js';
import { RefusalLog } from '../listeners/connection-gate.js';
import type { EdgeMetrics } from '../metrics/metrics.js';
import type { TunnelRegistry } from '../registry/tunnel-registry.js';
import { nodeCredentials } from './cluster-ca.js';
import { ClusterNode } from './cluster-node.js';
import { NodeLinks } from './node-links.js';

/** The file in the data folder that keeps a generated node id across restarts. */
const NODE_ID_FILE = 'node-id';

/** Where and how this process joins: the store's URL and the `--node-*` options. */
export interface ClusterSettings {
  database: string;
  config: ClusterConfig;
  dataDir: string;
}

/** A joined (not yet started) node and what it holds open. */
export interface ClusterMembership {
  node: ClusterNode;
  /** Every role has links; an API-only node's only dial (its `address` is ''). */
  links: NodeLinks | undefined;
  /** Leave the cluster and close the links and the notice channel. */
  close(): Promise<void>;
}

/** The file that says which process uses the data folder's node id now. */
const NODE_LOCK_FILE = 'node-id.pid';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * `--node-id`, or the id kept in the data folder, made once from the host name: readable in logs
 * and stable across restarts, so a restarted node is the same node. Two live processes must never
 * share an id: when another running process holds the folder's id (one data folder shared by
 * several servers), this one gets an id of its own for its lifetime.
 * @example const { id, release } = await resolveNodeId(config.cluster, '/var/lib/burrow', logger);
 */
export async function resolveNodeId(
  config: ClusterConfig,
  dataDir: string,
  logger: Logger,
): Promise<{ id: string; release(): Promise<void> }> {
  const none = { release: () => Promise.resolve() };
  if (config.nodeId !== '') return { id: config.nodeId, ...none };
  const base =
    hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'node';
  const fresh = (): string => `${base}-${randomBytes(3).toString('hex')}`;
  const path = join(dataDir, NODE_ID_FILE);
  // An existing file wins (publishExclusive never replaces), so concurrent starts agree.
  await publishExclusive(path, `${fresh()}\n`, 0o644);
  const kept = (await readFile(path, 'utf8')).trim();
  const lock = join(dataDir, NODE_LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lock, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
      return { id: kept, release: () => rm(lock, { force: true }) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number((await readFile(lock, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder)) break;
    await rm(lock, { force: true }); // left by a process that is gone
  }
  const id = fresh();
  logger.warn(
    { node: id, kept, dataDir },
    'another running server uses this data folder and its node id: this process is a node of its own',
  );
  return { id, ...none };
}

/**
 * Join the cluster on `settings.database` with `registry` as this node's live state.
 * @example
 * const member = await joinCluster({ settings, repos, registry, logger, role: 'all' });
 * startAgentListener({ …, claims: member.node.presence }); await member.node.start();
 */
export async function joinCluster(options: {
  settings: ClusterSettings;
  repos: Repositories;
  registry: TunnelRegistry;
  logger: Logger;
  role: 'all' | 'api' | 'edge';
  /** Counts the node-link listener's refusals (`burrow_limit_refusals_total`). */
  metrics?: EdgeMetrics | undefined;
}): Promise<ClusterMembership> {
  const { settings, repos, registry, role } = options;
  const logger = options.logger.child({ component: 'cluster' });
  const identity = await resolveNodeId(settings.config, settings.dataDir, logger);
  const nodeId = identity.id;
  let notifications: StoreNotifications;
  try {
    notifications = await StoreNotifications.start({
      url: settings.database,
      from: nodeId,
      onError: (err) => logger.warn({ err: err.message }, 'cluster notices'),
    });
  } catch (err) {
    await identity.release();
    throw err;
  }
  let links: NodeLinks | undefined;
  let node: ClusterNode | undefined;
  try {
    // An API-only node serves no tunnel and listens for no link: it dials the edge nodes to ask
    // what they saw (the cluster's traffic inspector, cluster-traffic.ts).
    links = await NodeLinks.start({
      nodeId,
      credentials: await nodeCredentials(repos.settings, nodeId),
      listen: role === 'api' ? undefined : settings.config.nodeListen,
      advertise: settings.config.nodeAdvertise || undefined,
      logger,
      refusals: new RefusalLog(logger, options.metrics),
      open: (request, peerId) => node!.openLocal(request, peerId),
      answer: (query, peerId) => node!.answerQuery(query, peerId),
    });
    node = new ClusterNode({
      nodeId,
      role,
      cluster: repos.cluster,
      notifications,
      registry,
      logger,
      links,
      heartbeatMs: settings.config.heartbeatMs,
      timeoutMs: settings.config.timeoutMs,
    });
  } catch (err) {
    await links?.close();
    await notifications.close();
    await identity.release();
    throw err;
  }
  // Writes through this process's API reach the other nodes at once, naming the one they changed
  // so the others reload it alone (changed-ids.ts).
  const announceEdges = (id: string): void => node.announce('edges', { edges: [id] });
  const announceCloud = (id: string): void => node.announce('cloud_endpoints', { ids: [id] });
  repos.edges.changes.on('change', announceEdges);
  repos.cloudEndpoints.changes.on('change', announceCloud);
  const member = node;
  return {
    node: member,
    links,
    async close() {
      repos.edges.changes.off('change', announceEdges);
      repos.cloudEndpoints.changes.off('change', announceCloud);
      await member.close();
      await links?.close();
      await notifications.close();
      await identity.release();
    },
  };
}
