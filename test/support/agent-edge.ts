import tls from 'node:tls';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { startAgentListener, type AgentListener } from '../../src/edge/sessions/agent-listener.js';
import type { SessionLimits } from '../../src/edge/sessions/agent-session.js';
import type { AgentEdgeSettings } from '../../src/edge/binds/agent-edge-settings.js';
import { LocalCa } from '../../src/edge/certificates/certificates.js';
import { EdgeMetrics } from '../../src/edge/metrics/metrics.js';
import { TunnelRegistry } from '../../src/edge/registry/tunnel-registry.js';
import {
  type Auth,
  type AuthExtra,
  type AuthResp,
  type Heartbeat,
  MuxSession,
  RpcError,
  StreamType,
  TypedSession,
  call,
} from '../../src/protocol/index.js';
import { openStore, type Repositories, type Store } from '../../src/store/index.js';
import { createTestRepositories, TEST_STORE_SETTINGS } from './api.js';
import { createTestDatabase, type TestDatabase } from './stores.js';

/** The agent-side settings of test edges (public HTTPS on 8443, HTTP on 8080). */
export const TEST_AGENT_SETTINGS: AgentEdgeSettings = {
  ...TEST_STORE_SETTINGS,
  httpPort: 8080,
  region: 'local',
};

/** An agent listener over a fresh database, with its registry and CA, for agent tests. */
export interface TestAgentEdge {
  listener: AgentListener;
  registry: TunnelRegistry;
  metrics: EdgeMetrics;
  repos: Repositories;
  store: Store;
  db: TestDatabase;
  caPem: string;
  /** `127.0.0.1:<port>` of the listener. */
  serverAddr: string;
  /** An authtoken (optionally with an ACL / owned by a bot user). */
  token(options?: { acl?: string[]; owner_id?: string }): Promise<string>;
  close(): Promise<void>;
}

/**
 * Start an in-process agent listener on 127.0.0.1 with a real store and a local CA in a temp
 * data folder.
 * @example const edge = await startTestAgentEdge('sqlite'); const token = await edge.token();
 */
export async function startTestAgentEdge(
  kind: 'sqlite' | 'postgres',
  options: {
    limits?: Partial<SessionLimits>;
    /** `--agent-proxy-protocol 1` (the header deadline is handshakeTimeoutMs). */
    proxyProtocol?: boolean;
    handshakeTimeoutMs?: number;
  } = {},
): Promise<TestAgentEdge> {
  const db = await createTestDatabase(kind);
  const store = await openStore({ database: db.database, dataDir: db.dataDir });
  const repos = createTestRepositories(store);
  const ca = await LocalCa.loadOrCreate(db.dataDir);
  const registry = new TunnelRegistry();
  const metrics = new EdgeMetrics();
  const listener = await startAgentListener({
    listen: '127.0.0.1:0',
    repos,
    registry,
    metrics,
    logger: pino({ level: process.env.BURROW_TEST_LOG ?? 'silent' }),
    ca,
    settings: TEST_AGENT_SETTINGS,
    limits: options.limits,
    proxyProtocol: options.proxyProtocol,
    handshakeTimeoutMs: options.handshakeTimeoutMs,
  });
  return {
    listener,
    registry,
    metrics,
    repos,
    store,
    db,
    caPem: ca.certPem,
    serverAddr: `127.0.0.1:${listener.port}`,
    async token(o = {}) {
      return (await repos.credentials.create({ acl: o.acl, owner_id: o.owner_id })).token!;
    },
    async close() {
      await listener.close();
      await store.close();
      await db.drop();
    },
  };
}

/** A minimal agent built from our protocol library, for driving the edge in unit tests. */
export interface TestAgent {
  socket: tls.TLSSocket;
  mux: MuxSession;
  typed: TypedSession;
  auth(extra?: AuthExtra, request?: Partial<Auth>): Promise<AuthResp>;
  heartbeat(intervalMs?: number): Heartbeat;
  close(): void;
}

/**
 * Connect to `edge` over TLS (trusting its CA) with client-role muxado.
 * @example const agent = await connectTestAgent(edge); await agent.auth({ AuthToken: token });
 */
export async function connectTestAgent(
  edge: { listener: Pick<AgentListener, 'port'>; caPem: string },
  options: { alpn?: string[] } = {},
): Promise<TestAgent> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port: edge.listener.port,
    ca: edge.caPem,
    ALPNProtocols: options.alpn ?? [],
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => {});
  const mux = new MuxSession(socket, { role: 'client' });
  const typed = new TypedSession(mux);
  return {
    socket,
    mux,
    typed,
    auth: (extra = {}, request = {}) =>
      call(mux, StreamType.Auth, { Version: ['3', '2'], ClientId: '', ...request, Extra: extra }),
    heartbeat(intervalMs = 10_000) {
      return typed.startHeartbeat({ interval: intervalMs, closeOnTimeout: false });
    },
    close: () => mux.destroy(),
  };
}

/**
 * What `p` rejected with, asserting it is an RpcError (the edge's refusal of an RPC).
 * @example expect((await expectRpcError(agent.bind(req))).errorCode).toBe('ERR_NGROK_324');
 */
export async function expectRpcError(p: Promise<unknown>): Promise<RpcError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RpcError);
  return err as RpcError;
}

/** An agent edge for one describe block, and the agents its tests connect (see useTestAgentEdge). */
export interface AgentEdgeFixture {
  readonly edge: TestAgentEdge;
  /** An authtoken of the edge's store. */
  readonly token: string;
  /** A connected agent, closed after the test. */
  connect(options?: { alpn?: string[] }): Promise<TestAgent>;
  /** A connected agent that has authenticated with `token`. */
  authed(): Promise<TestAgent>;
}

/**
 * Start an agent edge before the describe block's tests, close the agents each test connected
 * after it, and stop the edge after them all.
 * @example
 * const fx = useTestAgentEdge('sqlite', { limits: { maxTunnelsPerSession: 2 } });
 * it('…', async () => { const agent = await fx.authed(); … });
 */
export function useTestAgentEdge(
  kind: Parameters<typeof startTestAgentEdge>[0],
  options?: Parameters<typeof startTestAgentEdge>[1],
): AgentEdgeFixture {
  let edge: TestAgentEdge | undefined;
  let token = '';
  const agents: TestAgent[] = [];
  beforeAll(async () => {
    edge = await startTestAgentEdge(kind, options);
    token = await edge.token();
  });
  afterEach(() => {
    for (const agent of agents.splice(0)) agent.close();
  });
  afterAll(async () => edge?.close());
  const fixture: AgentEdgeFixture = {
    get edge() {
      if (!edge) throw new Error('the agent edge starts in beforeAll');
      return edge;
    },
    get token() {
      return token;
    },
    async connect(connectOptions) {
      const agent = await connectTestAgent(fixture.edge, connectOptions);
      agents.push(agent);
      return agent;
    },
    async authed() {
      const agent = await fixture.connect();
      await agent.auth({ AuthToken: token });
      return agent;
    },
  };
  return fixture;
}
