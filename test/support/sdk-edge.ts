/**
 * A whole in-process edge for SDK tests: agent listener and public ingress (HTTP, HTTPS/TLS by
 * SNI, TCP) over one registry and a real store, restartable on the same ports the way a
 * `burrow server` process restarts (new registry and sessions, same database and CA).
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import net from 'node:net';
import { pino } from 'pino';
import {
  startAgentListener,
  type AgentListener,
  type AgentListenerOptions,
} from '../../src/edge/sessions/agent-listener.js';
import type { SessionLimits } from '../../src/edge/sessions/agent-session.js';
import { CertificateStore, LocalCa } from '../../src/edge/certificates/certificates.js';
import { startIngress, type Ingress } from '../../src/edge/ingress/ingress.js';
import { EdgeMetrics } from '../../src/edge/metrics/metrics.js';
import { TunnelRegistry } from '../../src/edge/registry/tunnel-registry.js';
import { openStore, type Repositories, type Store } from '../../src/store/index.js';
import { TEST_AGENT_SETTINGS } from './agent-edge.js';
import { createTestRepositories, TEST_STORE_SETTINGS } from './api.js';
import { createTestDatabase, type TestDatabase } from './stores.js';

export interface SdkTestEdge {
  repos: Repositories;
  store: Store;
  db: TestDatabase;
  /** The registry of the edge as it runs now (a restart makes a new one). */
  registry: TunnelRegistry;
  /** The metrics of the edge as it runs now (a restart makes new ones). */
  metrics: EdgeMetrics;
  listener: AgentListener;
  ingress: Ingress;
  /** `127.0.0.1:<port>` of the agent listener. */
  serverAddr: string;
  caPem: string;
  /** Path of the CA file, as `--ca` takes it. */
  caFile: string;
  httpPort: number;
  httpsPort: number;
  /** An authtoken (optionally with an ACL). */
  token(options?: { acl?: string[]; owner_id?: string }): Promise<string>;
  /** Stop the agent listener and ingress (agents get GOAWAY), then start them again. */
  restart(options?: { downMs?: number }): Promise<void>;
  close(): Promise<void>;
}

function portOf(address: string): number {
  return Number(address.slice(address.lastIndexOf(':') + 1));
}

/**
 * Start an edge on 127.0.0.1 (random ports) over a fresh `kind` database.
 * @example const edge = await startSdkTestEdge('sqlite'); const token = await edge.token();
 */
export async function startSdkTestEdge(
  kind: 'sqlite' | 'postgres',
  options: {
    limits?: Partial<SessionLimits>;
    policyRetention?: AgentListenerOptions['policyRetention'];
  } = {},
): Promise<SdkTestEdge> {
  const db = await createTestDatabase(kind);
  const store = await openStore({ database: db.database, dataDir: db.dataDir });
  const repos = createTestRepositories(store);
  const ca = await LocalCa.loadOrCreate(db.dataDir);
  const caFile = join(db.dataDir, 'ca-for-agents.pem');
  writeFileSync(caFile, ca.certPem);
  const logger = pino({ level: process.env.BURROW_TEST_LOG ?? 'silent' });
  const base = TEST_STORE_SETTINGS.baseDomain;

  const start = async (ports: { agent: number; http: number; https: number }) => {
    const registry = new TunnelRegistry();
    const metrics = new EdgeMetrics();
    const listener = await startAgentListener({
      listen: `127.0.0.1:${ports.agent}`,
      repos,
      registry,
      metrics,
      logger,
      ca,
      settings: TEST_AGENT_SETTINGS,
      limits: options.limits,
      policyRetention: options.policyRetention,
    });
    const certificates = new CertificateStore({
      ca,
      nameAllowed: (name) => name === base || name.endsWith(`.${base}`),
    });
    const ingress = await startIngress({
      httpListen: `127.0.0.1:${ports.http}`,
      httpsListen: `127.0.0.1:${ports.https}`,
      registry,
      metrics,
      certificates,
      logger,
      connectTimeoutMs: 5000,
    });
    return { registry, metrics, listener, ingress };
  };

  let running = await start({ agent: 0, http: 0, https: 0 });
  const edge: SdkTestEdge = {
    repos,
    store,
    db,
    registry: running.registry,
    metrics: running.metrics,
    listener: running.listener,
    ingress: running.ingress,
    serverAddr: `127.0.0.1:${running.listener.port}`,
    caPem: ca.certPem,
    caFile,
    httpPort: portOf(running.ingress.httpAddress),
    httpsPort: portOf(running.ingress.httpsAddress),
    async token(o = {}) {
      return (await repos.credentials.create({ acl: o.acl, owner_id: o.owner_id })).token!;
    },
    async restart(o = {}) {
      const ports = { agent: running.listener.port, http: edge.httpPort, https: edge.httpsPort };
      await running.listener.close();
      await running.ingress.close();
      await new Promise((resolve) => setTimeout(resolve, o.downMs ?? 0));
      running = await start(ports);
      edge.registry = running.registry;
      edge.metrics = running.metrics;
      edge.listener = running.listener;
      edge.ingress = running.ingress;
    },
    async close() {
      await running.listener.close();
      await running.ingress.close();
      await store.close();
      await db.drop();
    },
  };
  return edge;
}

/**
 * A TCP relay between agents and the edge that can cut or freeze its connections: freezing stops
 * forwarding without closing anything, like a network that silently drops packets.
 * @example const relay = await startRelay(edge.serverAddr); connect({ serverAddr: relay.addr, ... }); relay.freeze();
 */
export interface Relay {
  addr: string;
  /** Connections relayed so far. */
  readonly accepted: number;
  /** Stop forwarding on the open connections (new ones are relayed normally). */
  freeze(): void;
  /** Close the open connections at once. */
  cut(): void;
  close(): Promise<void>;
}

export async function startRelay(target: string): Promise<Relay> {
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon);
  const port = Number(target.slice(colon + 1));
  const pairs = new Set<[net.Socket, net.Socket]>();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(port, host);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream).pipe(client);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    addr: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get accepted() {
      return accepted;
    },
    freeze() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        client.removeAllListeners('data');
        upstream.removeAllListeners('data');
      }
      pairs.clear();
    },
    cut() {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const [client, upstream] of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
