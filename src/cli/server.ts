import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { once } from 'node:events';
import type { FastifyInstance } from 'fastify';
import { loadServerConfig, type ServerConfig } from '../core/config.js';
import { configureEgress } from '../core/egress-guard.js';
import { formatHostPort, parseHostPort } from '../core/host-port.js';
import { createLogger, type Logger } from '../core/logger.js';
import { buildApi } from '../api/app.js';
import { onlineStateOf } from '../api/online.js';
import { gateConnections, RefusalLog } from '../edge/listeners/connection-gate.js';
import { fitToOpenFiles, openFilesLimit } from '../edge/listeners/descriptor-budget.js';
import { startEdge, type Edge } from '../edge/edge.js';
import {
  joinCluster,
  type ClusterMembership,
  type ClusterSettings,
} from '../edge/cluster/join-cluster.js';
import { trafficViewFor } from '../edge/cluster/cluster-traffic.js';
import { TunnelRegistry } from '../edge/registry/tunnel-registry.js';
import { validatePolicy } from '../policy/validate.js';
import {
  configureIpIntelligence,
  configureManagedOAuthApps,
  openIpIntelligence,
} from '../policy/index.js';
import { announceDashboardSetup } from './dashboard-setup.js';
import {
  createRepositories,
  openStore,
  type Repositories,
  type Store,
  type StoreSettings,
} from '../store/index.js';

/** A running `burrow server`. */
export interface RunningServer {
  config: ServerConfig;
  store: Store;
  repos: Repositories;
  api: FastifyInstance | undefined;
  edge: Edge | undefined;
  /** The API's bound address (host:port), with the real port when 0 was asked for. */
  apiAddress: string | undefined;
  /** Stop accepting, let requests in flight finish (up to `graceMs`), close everything. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The repositories of a server: its settings, and the policy engine plugged into the store so
 * traffic policies are validated in full when saved.
 * @example const repos = serverRepositories(store, loadServerConfig({}));
 */
export function serverRepositories(store: Store, config: ServerConfig): Repositories {
  const settings: StoreSettings = {
    baseDomain: config.baseDomain,
    tcpHost: config.tcpHost,
    tcpPorts: config.tcpPorts,
    httpsPort: parseHostPort(config.httpsListen, { minPort: 1 })?.port ?? 443,
    acmeEnabled: config.acmeDirectory !== '',
  };
  return createRepositories(store, settings, { validateTrafficPolicy: validatePolicy });
}

/**
 * Open the store the server options `flags` name, run `work` with its repositories, and close it
 * again: the commands that change the store directly (`api-key create`, `ssh-key add`, `user`).
 * @example const key = await withServerRepositories(flags, (repos) => repos.apiKeys.create({ description: '' }));
 */
export async function withServerRepositories<T>(
  flags: Record<string, string | undefined>,
  work: (repos: Repositories) => Promise<T>,
): Promise<T> {
  const config = loadServerConfig(flags);
  const store = await openStore({ database: config.database, dataDir: config.dataDir });
  try {
    return await work(serverRepositories(store, config));
  } finally {
    await store.close();
  }
}

function hostAndPort(listen: string): { host: string; port: number } {
  const hp = parseHostPort(listen);
  if (!hp) throw new Error(`'${listen}' is not host:port`); // config checked it already
  return hp;
}

/** A free port on `host`, for `--api-listen host:0` (the API's uris need the port before it binds). */
async function freePort(host: string): Promise<number> {
  const probe = createNetServer();
  probe.listen(0, host);
  await once(probe, 'listening');
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * Caps of the `--metrics-listen` listener: a scraper or two, never a flood (its descriptors come
 * out of the process's reserve, security.md "Connection budgets").
 */
const METRICS_LISTENER_CAPS = { name: 'metrics', maxTotal: 16, maxPerIp: 4 };

async function startMetricsListener(
  listen: string,
  render: () => Promise<string>,
  refusals: RefusalLog,
): Promise<Server> {
  const options = { headersTimeout: 10_000, connectionsCheckingInterval: 1000 };
  const server = createHttpServer(options, (req, res) => {
    if (req.url?.split('?')[0] !== '/metrics') {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('Not Found: metrics are at /metrics\n');
      return;
    }
    render().then(
      (text) => res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text),
      (err: unknown) =>
        res
          .writeHead(500, { 'content-type': 'text/plain' })
          .end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
    );
  });
  gateConnections(server, METRICS_LISTENER_CAPS, refusals);
  const { host, port } = hostAndPort(listen);
  server.listen(port, host);
  await once(server, 'listening');
  return server;
}

/**
 * Start the processes `--role` asks for: the API and the edge (agent listener, public ingress)
 * over one store.
 */
export async function startServer(
  config: ServerConfig,
  logger: Logger = createLogger(config.logLevel),
): Promise<RunningServer> {
  // Outbound calls of traffic policies: internal addresses only as --egress-allow says.
  configureEgress({
    allow: config.egressAllow,
    ownAddresses: config.publicIp,
    onRefused: (err) =>
      logger.warn({ code: err.code, host: err.host, address: err.address }, err.message),
  });
  // Traffic policies' data: IP intelligence files (watched) and the operator's OAuth apps.
  configureIpIntelligence(await openIpIntelligence(config.geoip));
  configureManagedOAuthApps(config.oauthApps);
  const store = await openStore({
    database: config.database,
    dataDir: config.dataDir,
    onConnectionError: (err) =>
      logger.warn({ err: err.message }, 'database connection lost; reconnecting on demand'),
  });
  const repos = serverRepositories(store, config);
  // On PostgreSQL every process is a node of one cluster (a cluster of one is fine).
  const cluster: ClusterSettings | undefined =
    store.dialect === 'postgres'
      ? { database: config.database, config: config.cluster, dataDir: config.dataDir }
      : undefined;
  let api: FastifyInstance | undefined;
  let edge: Edge | undefined;
  /** An API-only node's view of the cluster: other nodes' sessions, commands to them. */
  let apiNode: ClusterMembership | undefined;
  let metricsServer: Server | undefined;
  let apiAddress: string | undefined;
  // Every listener's connection caps fit the open-files limit together, with a share kept for
  // agents, so a flood on the API or the ingress cannot take the descriptors agents need.
  const fitted = fitToOpenFiles(config.limits, config.role, openFilesLimit());
  if (fitted.lowered.length > 0) {
    logger.info(
      { openFiles: fitted.openFiles, lowered: fitted.lowered },
      'connection caps lowered to fit the open-files limit',
    );
  }
  const limits = fitted.limits;
  try {
    if (config.role !== 'api') {
      edge = await startEdge({ config: { ...config, limits }, repos, logger, cluster });
    }
    const renderMetrics = edge ? () => edge!.metrics.metrics() : undefined;
    if (renderMetrics && config.metricsListen) {
      metricsServer = await startMetricsListener(
        config.metricsListen,
        renderMetrics,
        new RefusalLog(logger, edge?.metrics),
      );
      logger.info({ address: config.metricsListen }, 'metrics listening');
    }
    if (config.role !== 'edge') {
      const { host, port: askedPort } = hostAndPort(config.apiListen);
      const port = askedPort === 0 ? await freePort(host) : askedPort;
      const explicitUrl = config.publicApiUrl !== `http://${config.apiListen}`;
      const apiLogger = logger.child({ component: 'api' });
      // Counted in the edge's /metrics when this process runs one; logged either way.
      const apiRefusals = new RefusalLog(apiLogger, edge?.metrics);
      if (!edge && !cluster) {
        apiLogger.warn(
          'an API-only process on SQLite lists no agents: tunnel sessions, tunnels and endpoints live in the edge process; run the processes on one PostgreSQL (docs/operations.md "Several nodes") to see them',
        );
      }
      if (!edge && cluster) {
        const registry = new TunnelRegistry();
        apiNode = await joinCluster({ settings: cluster, repos, registry, logger, role: 'api' });
        await apiNode.node.start();
      }
      const node = apiNode?.node;
      api = await buildApi({
        repos,
        publicApiUrl: explicitUrl ? config.publicApiUrl : `http://${formatHostPort(host, port)}`,
        rateLimit: config.apiRateLimit,
        dashboardOidc: config.dashboardOidc,
        logger: apiLogger,
        limits: {
          maxBodyBytes: config.limits.apiMaxBodyBytes,
          maxJsonDepth: config.limits.apiMaxJsonDepth,
        },
        timeouts: { headersMs: limits.apiHeadersTimeoutMs, idleMs: limits.apiIdleTimeoutMs },
        refused: (ip, limit) => apiRefusals.refused(ip, limit),
        online: edge
          ? {
              ...onlineStateOf(edge.registry),
              policyEvents: edge.policyEvents,
              traffic: edge.traffic,
              trafficView: trafficViewFor(edge.cluster?.node, edge.traffic),
              series: edge.metrics.series,
              credentialsChanged: () => void edge!.credentialsChanged(),
              configChanged: (topic, inputs) => edge!.configChanged(topic, inputs),
              nodeId: edge.cluster?.node.id,
            }
          : node
            ? {
                ...onlineStateOf(node.registry),
                // No edge here: the inspector asks the edge nodes what they served.
                trafficView: trafficViewFor(node, undefined),
                credentialsChanged: () => node.announce('credentials'),
                configChanged: (topic, inputs) => node.announce(topic, inputs && { inputs }),
                nodeId: node.id,
              }
            : undefined,
        metrics: config.metricsListen ? undefined : renderMetrics,
      });
      gateConnections(
        api.server,
        {
          name: 'api',
          maxTotal: limits.apiMaxConnections,
          maxPerIp: limits.apiMaxConnectionsPerIp,
        },
        apiRefusals,
      );
      await api.listen({ host, port });
      apiAddress = formatHostPort(host, port);
      logger.info({ address: apiAddress, database: store.location }, 'API listening');
      await announceDashboardSetup(
        repos,
        explicitUrl ? config.publicApiUrl : `http://${apiAddress}`,
        logger,
      );
      if ((await repos.apiKeys.count()) === 0) {
        const where = config.database
          ? `--database '${store.location}'`
          : `--data-dir '${config.dataDir}'`;
        const hint = `No API key exists yet. Create one with: burrow api-key create ${where}`;
        logger.warn(hint);
        process.stderr.write(`\n  ${hint}\n\n`);
      }
    }
  } catch (err) {
    await api?.close();
    await apiNode?.close();
    await edge?.close();
    metricsServer?.close();
    await store.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    config,
    store,
    repos,
    api,
    edge,
    apiAddress,
    close(graceMs = 10_000) {
      closing ??= (async () => {
        await Promise.all([api?.close(), edge?.drain(graceMs)]);
        await apiNode?.close();
        metricsServer?.close();
        await store.close();
      })();
      return closing;
    },
  };
}
