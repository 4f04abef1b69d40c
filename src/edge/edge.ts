import { join } from 'node:path';
import type { ServerConfig } from '../core/config.js';
import { parseHostPort } from '../core/host-port.js';
import { isAtOrUnder, isOneLabelUnder } from '../core/hostname.js';
import type { Logger } from '../core/logger.js';
import { PolicyEventLog, SecretsResolver } from '../policy/index.js';
import type { Repositories } from '../store/index.js';
import { AgentCertificatePicker } from './sessions/agent-listener-certificates.js';
import { startAgentListener, type AgentListener } from './sessions/agent-listener.js';
import {
  acmeHttpChallenges,
  startCertificateManagement,
  storedCertificates,
  type CertificateManagement,
} from './certificates/certificate-management.js';
import {
  CERTS_DIR,
  CertificateStore,
  LocalCa,
  wildcardSanFor,
} from './certificates/certificates.js';
import { publicEndpointUrl, type AgentEdgeSettings } from './binds/agent-edge-settings.js';
import { CloudEndpoints } from './binds/cloud-endpoints.js';
import { EdgeRoutes } from './binds/edge-routes.js';
import { startIngress, type Ingress } from './ingress/ingress.js';
import { EdgeMetrics } from './metrics/metrics.js';
import { TunnelRegistry } from './registry/tunnel-registry.js';
import { TrafficLog } from './metrics/traffic-log.js';
import { EventRouter } from './events/event-router.js';
import { trafficInspector, type TrafficInspector } from './metrics/traffic-replay.js';
import { trafficExchangeTap } from './ingress/http/traffic-tap.js';
import { startSshListener, type SshListener } from './ssh/ssh-listener.js';
import { sshRequestLog } from './ssh/ssh-tunnel.js';
import { sharedLocalCa } from './certificates/shared-ca.js';
import { changedIds } from './cluster/changed-ids.js';
import { answerTrafficQuery } from './cluster/traffic-answers.js';
import {
  joinCluster,
  type ClusterMembership,
  type ClusterSettings,
} from './cluster/join-cluster.js';

/**
 * How often secrets are reloaded when nothing announced a change (a write through another
 * process's API without a cluster link, or a notice lost).
 */
const SECRETS_RELOAD_MS = 30_000;

/** A running edge: the agent listener and the public ingress over one tunnel registry. */
export interface Edge {
  registry: TunnelRegistry;
  metrics: EdgeMetrics;
  ca: LocalCa;
  agentAddress: string;
  httpAddress: string;
  httpsAddress: string;
  /** The DNS server's address, when `--dns-listen` is set. */
  dnsAddress: string | undefined;
  /** The SSH listener's address, when `--ssh-listen` is set. */
  sshAddress: string | undefined;
  /** Events of every traffic policy this edge runs: the API's `online.policyEvents`. */
  policyEvents: PolicyEventLog;
  /** The last HTTP requests of each endpoint, in this process's memory (the dashboard's Traffic). */
  traffic: TrafficInspector;
  /** A credential or bot user changed in this process: close revoked sessions now. */
  credentialsChanged(): Promise<void>;
  /**
   * Something edges read at their reload (`edges`) or a served certificate changed through this
   * process's API: apply it here now, and announce it to the other nodes.
   */
  configChanged(
    topic: 'edges' | 'certificates' | 'secrets' | 'events',
    inputs?: readonly string[],
  ): void;
  /** The values policies read with `secrets.get`, kept loaded from the store. */
  secrets: SecretsResolver;
  /** This process as a node of a cluster (a postgres:// database); undefined otherwise. */
  cluster: ClusterMembership | undefined;
  /**
   * SIGTERM: stop accepting, let open requests finish for up to `graceMs`, tell agents to
   * reconnect elsewhere, then close everything.
   */
  drain(graceMs?: number): Promise<void>;
  close(): Promise<void>;
}

export interface EdgeOptions {
  config: ServerConfig;
  repos: Repositories;
  logger: Logger;
  /** Join a cluster: several nodes on one PostgreSQL (docs/operations.md "Several nodes"). */
  cluster?: ClusterSettings | undefined;
}

function portOf(listen: string): number {
  return parseHostPort(listen)?.port ?? 0;
}

/**
 * Start the edge: load (or create) the local CA, listen for agents on `--agent-listen`, serve
 * public traffic on `--http-listen`, `--https-listen` and the TCP ports of online tunnels.
 * @example const edge = await startEdge({ config, repos, logger }); await edge.drain();
 */
export async function startEdge(options: EdgeOptions): Promise<Edge> {
  const { config, repos } = options;
  const logger = options.logger.child({ component: 'edge' });
  // A cluster's nodes sign with one CA, so agents trust every node and fail over between them.
  const ca = options.cluster
    ? await sharedLocalCa(config.dataDir, repos.settings, logger)
    : await LocalCa.loadOrCreate(config.dataDir);
  const registry = new TunnelRegistry();
  const metrics = new EdgeMetrics();
  const policyEvents = new PolicyEventLog({ logger: logger.child({ component: 'policy' }) });
  // Loaded before anything binds a policy; reloaded on every `secrets` notice and on a timer.
  const secrets = new SecretsResolver(() => repos.secrets.entries());
  await secrets.reload();
  const reloadSecrets = (): void => {
    secrets
      .reload()
      .catch((err: unknown) =>
        logger.warn(
          { err: (err as Error).message },
          'secrets reload failed; keeping the previous values',
        ),
      );
  };
  // Traffic events out: destinations and subscriptions from the store, reloaded like secrets.
  const events = new EventRouter({
    source: {
      deliveries: () => repos.eventDestinations.deliveries(),
      subscriptions: () => repos.eventSubscriptions.all(),
    },
    logger,
  });
  const reloadEvents = (): void => {
    events
      .reload()
      .catch((err: unknown) =>
        logger.warn({ err: (err as Error).message }, 'event destinations reload failed'),
      );
  };
  reloadEvents();
  const secretsTimer = setInterval(() => {
    reloadSecrets();
    reloadEvents();
  }, SECRETS_RELOAD_MS);
  secretsTimer.unref();
  const baseWildcard = `*.${config.baseDomain}`;
  // SSH sessions print their requests: the log hears of every answered one, from both HTTP paths.
  const sshLog = config.sshListen ? sshRequestLog(registry) : undefined;
  const trafficLog = new TrafficLog({
    redactHeaders: config.inspectRedactHeaders,
    onAnswered: (record) => {
      events.httpRequest(record);
      sshLog?.(record);
    },
  });
  const certsDir = join(config.dataDir, CERTS_DIR);
  const stored = storedCertificates(repos);

  // Certificates only for names this edge serves, so nobody can make it mint arbitrary ones.
  const certificates: CertificateStore = new CertificateStore({
    ca,
    certsDir,
    stored,
    logger,
    nameAllowed: async (name) =>
      registry.byHost(name) !== undefined ||
      // Random names are one label under the base domain; deeper ones are served only when a
      // tunnel or reservation has them, else every invented name would cost a certificate.
      isOneLabelUnder(name, config.baseDomain) ||
      (await repos.reservedDomains.findCovering(name)) !== undefined,
    sanFor: async (name) => {
      if (isAtOrUnder(name, config.baseDomain)) return wildcardSanFor(name, baseWildcard);
      const reserved = await repos.reservedDomains.findCovering(name);
      return reserved ? wildcardSanFor(name, reserved.domain) : [name];
    },
  });

  const agentCertificates = new AgentCertificatePicker(
    config.agentHostname || undefined,
    stored,
    logger,
  );

  // Edges' hostports are routes like endpoints: TCP ports and TLS names of the same ingress.
  // Both follow the store by change events; the full reload is a slow safety net.
  const storeRoutes = {
    repos,
    registry,
    policyEvents,
    secrets,
    logger,
    syncIntervalMs: config.cluster.reconcileMs,
  };
  const edges = new EdgeRoutes(storeRoutes);

  let agents: AgentListener | undefined;
  let ingress: Ingress | undefined;
  let management: CertificateManagement | undefined;
  let cloud: CloudEndpoints | undefined;
  let ssh: SshListener | undefined;
  let member: ClusterMembership | undefined;
  try {
    member = options.cluster
      ? await joinCluster({
          settings: options.cluster,
          repos,
          registry,
          logger,
          role: config.role,
          metrics,
        })
      : undefined;
    // Routed before agents connect, so an edge's name or port is the edge's, not an agent's.
    await edges.start();
    ingress = await startIngress({
      acmeChallenge: config.acmeDirectory ? acmeHttpChallenges(repos) : undefined,
      httpListen: config.httpListen,
      httpsListen: config.httpsListen,
      registry,
      metrics,
      certificates,
      logger,
      limits: config.limits,
      exchangeTap: trafficExchangeTap(trafficLog),
      // Requests get the edge's span (and the service a new traceparent) only while spans go out.
      tracing: () => events.tracing,
      onRelayClosed: events.tcpClosed,
    });
    const settings: AgentEdgeSettings = {
      baseDomain: config.baseDomain,
      tcpHost: config.tcpHost,
      tcpPorts: config.tcpPorts,
      httpsPort: portOf(ingress.httpsAddress),
      httpPort: portOf(ingress.httpAddress),
    };
    agents = await startAgentListener({
      listen: config.agentListen,
      repos,
      registry,
      metrics,
      logger,
      ca,
      certsDir,
      hosts: config.agentHostname ? [config.agentHostname] : [],
      publicCertificate: agentCertificates,
      policyEvents,
      secrets,
      limits: {
        authTimeoutMs: config.limits.agentAuthTimeoutMs,
        maxSessionsPerCredential: config.limits.agentMaxSessionsPerCredential,
        maxStreamsPerSession: config.limits.agentMaxStreamsPerSession,
        maxTunnelsPerSession: config.limits.agentMaxTunnelsPerSession,
        maxFrameBytes: config.limits.agentMaxFrameBytes,
        maxRpcBytes: config.limits.agentMaxRpcBytes,
      },
      proxyProtocol: config.limits.agentProxyProtocol === 1,
      handshakeTimeoutMs: config.limits.tlsHandshakeTimeoutMs,
      maxConnections: {
        total: config.limits.agentMaxConnections,
        perIp: config.limits.agentMaxConnectionsPerIp,
      },
      settings,
      claims: member?.node.presence,
    });
    // SSH sessions are agents of another kind: their endpoints share the registry and budgets.
    ssh = config.sshListen
      ? await startSshListener({
          listen: config.sshListen,
          dataDir: config.dataDir,
          repos,
          registry,
          policies: agents.policies,
          settings,
          logger,
          metrics,
          claims: member?.node.presence,
          tcpListening: (port) => ingress?.tcp.listening(port) ?? Promise.resolve(),
        })
      : undefined;
    cloud = new CloudEndpoints({
      ...storeRoutes,
      // The URLs agents' endpoints get.
      publicUrl: (proto, where) => publicEndpointUrl(settings, proto, where),
    });
    await cloud.start();
    management = await startCertificateManagement({
      config,
      repos,
      logger,
      onIssued: () => {
        certificates.clear();
        agentCertificates.refresh();
        member?.node.announce('certificates');
      },
    });
    if (member) {
      const node = member.node;
      // Other nodes' tunnels run their policy here, where their traffic arrives.
      node.replica.policies = agents.policies;
      const started = { agents, cloud };
      // A notice names what changed (changed-ids.ts): only that is read; one naming nothing
      // (a reconnect) reloads everything.
      node.follow('edges', (data) => {
        const ids = changedIds(data, 'edges');
        return ids ? edges.syncIds(ids) : edges.inputsChanged(changedIds(data, 'inputs'));
      });
      node.follow('cloud_endpoints', (data) => {
        const ids = changedIds(data, 'ids');
        return ids ? started.cloud.syncIds(ids) : started.cloud.sync();
      });
      node.follow('credentials', async () => {
        await ssh?.revocation.checkNow();
        await started.agents.revocation.checkNow();
      });
      node.follow('secrets', () => secrets.reload());
      node.follow('events', () => events.reload());
      node.follow('certificates', () => {
        certificates.clear();
        agentCertificates.refresh();
      });
      // The cluster's inspector, on whichever node serves the API, asks what this one served.
      const inspector = trafficInspector(trafficLog, ingress.httpAddress);
      node.serve('traffic', (query) => answerTrafficQuery(inspector, node.id, query));
      await node.start();
    }
  } catch (err) {
    clearInterval(secretsTimer);
    await member?.close();
    cloud?.close();
    await management?.close();
    edges.close();
    await ssh?.close();
    await agents?.close();
    await ingress?.close();
    throw err;
  }
  const started = { agents, ingress, management };
  // The charts' buckets move on every 10 seconds (metrics/traffic-series.ts).
  metrics.series.start();
  logger.info(
    {
      agents: agents.address,
      http: ingress.httpAddress,
      https: ingress.httpsAddress,
      ca: join(config.dataDir, 'ca.pem'),
    },
    'edge listening',
  );

  let closing: Promise<void> | undefined;
  const drain = (graceMs = 10_000): Promise<void> =>
    (closing ??= (async () => {
      clearInterval(secretsTimer);
      metrics.series.stop();
      // Public side first: stop accepting and let requests in flight finish through their agents.
      await started.ingress.drain(graceMs);
      edges.close();
      await ssh?.close();
      await started.agents.drain(
        'the edge is shutting down; reconnect to another edge',
        Math.min(graceMs, 5000),
      );
      await started.agents.close();
      await member?.close();
      cloud?.close();
      await started.ingress.close();
      await started.management.close();
      // Last: the connections just closed have their events queued; they are sent before exit.
      await events.close();
    })());
  return {
    registry,
    metrics,
    ca,
    agentAddress: agents.address,
    httpAddress: ingress.httpAddress,
    httpsAddress: ingress.httpsAddress,
    dnsAddress: management.dnsAddress,
    sshAddress: ssh?.address,
    policyEvents,
    secrets,
    traffic: trafficInspector(trafficLog, ingress.httpAddress),
    credentialsChanged: () => {
      member?.node.announce('credentials');
      void ssh?.revocation.checkNow();
      return started.agents.revocation.checkNow();
    },
    configChanged: (topic, inputs) => {
      member?.node.announce(topic, inputs && { inputs });
      if (topic === 'certificates') {
        certificates.clear();
        agentCertificates.refresh();
      } else if (topic === 'secrets') {
        reloadSecrets();
      } else if (topic === 'events') {
        reloadEvents();
      } else {
        edges
          .inputsChanged(inputs)
          .catch((err: unknown) =>
            logger.warn(
              { err: (err as Error).message },
              'edge reload failed; the next change or reconcile retries',
            ),
          );
      }
    },
    cluster: member,
    drain,
    close: () => drain(0),
  };
}
