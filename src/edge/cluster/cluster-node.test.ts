/**
 * Two cluster nodes in one process, on one real PostgreSQL: each with its own registry, notice
 * channel, node links on 127.0.0.1 and ClusterNode, as `joinCluster` builds them. Local agents are
 * plain OnlineSession / OnlineTunnel objects whose streams are TCP connections to an echo server.
 * The 3-process test (test/cluster.test.ts) covers the same paths end to end, slowly.
 */
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ID_PREFIX, newId } from '../../core/ids.js';
import { createLogger } from '../../core/logger.js';
import { PolicyEventLog } from '../../policy/index.js';
import { StoreNotifications, openStore, type Repositories, type Store } from '../../store/index.js';
import { createTestRepositories } from '../../../test/support/api.js';
import { fakeTunnel, type FakeTunnel, type LocalServer } from '../../../test/support/ingress.js';
import { createTestDatabase, type TestDatabase } from '../../../test/support/stores.js';
import { startEchoUpstream } from '../../../test/support/tcp-upstreams.js';
import { compileBindPolicy, type BindTrafficPolicy } from '../binds/bind-traffic-policy.js';
import { EndpointPolicies } from '../binds/endpoint-policy.js';
import {
  TunnelRegistry,
  type OnlineSession,
  type OnlineTunnel,
  type ProxyInfo,
} from '../registry/tunnel-registry.js';
import { nodeCredentials } from './cluster-ca.js';
import { ClusterNode } from './cluster-node.js';
import { NodeLinks } from './node-links.js';
import { RemoteTunnel } from './online-rows.js';

const logger = createLogger('silent');
/** Beats often and forgets a node quiet for 1 s, so reaping is seen in a test. */
const FAST = { heartbeatMs: 200, timeoutMs: 1000 };
/** No heartbeat within a test, no reaping: only notices (or the test) move the state. */
const PARKED = { heartbeatMs: 60_000, timeoutMs: 60_000 };

interface TestNode {
  id: string;
  registry: TunnelRegistry;
  node: ClusterNode;
  links: NodeLinks;
  notifications: StoreNotifications;
  repos: Repositories;
  /** Set when the node runs other nodes' policies (an edge node). */
  policies: EndpointPolicies | undefined;
  close(): Promise<void>;
}

/** A local agent session that records what it was asked to do. */
interface LocalSession extends OnlineSession {
  calls: string[];
}

let db: TestDatabase;
/** Two stores (connection pools) on one database, one per side: as two processes have. */
let stores: [Store, Store];
let repos: [Repositories, Repositories];
let echo: LocalServer;
const open: TestNode[] = [];
let nextNode = 0;

beforeAll(async () => {
  db = await createTestDatabase('postgres');
  // One after the other: both would run the migrations.
  const first = await openStore({ database: db.database, dataDir: db.dataDir });
  const second = await openStore({ database: db.database, dataDir: db.dataDir });
  stores = [first, second];
  repos = [createTestRepositories(first), createTestRepositories(second)];
  echo = await startEchoUpstream();
});

afterEach(async () => {
  for (const n of open.splice(0).reverse()) await n.close();
});

afterAll(async () => {
  await echo?.close();
  for (const store of stores ?? []) await store.close();
  await db?.drop();
});

/**
 * A node as `joinCluster` builds one, started. `side` picks its store (0: A's, 1: B's).
 * @example const a = await startNode('a', 0, FAST);
 */
async function startNode(
  name: string,
  side: 0 | 1,
  timing: { heartbeatMs: number; timeoutMs: number },
  options: { policies?: boolean } = {},
): Promise<TestNode> {
  const id = `${name}-${++nextNode}`;
  const r = repos[side];
  const registry = new TunnelRegistry();
  const notifications = await StoreNotifications.start({
    url: db.database,
    from: id,
    onError: () => undefined,
  });
  const links = await NodeLinks.start({
    nodeId: id,
    credentials: await nodeCredentials(r.settings, id),
    listen: '127.0.0.1:0',
    logger,
    // Called only once the node below exists (a peer asks for a tunnel).
    open: (request, peerId) => node.openLocal(request, peerId),
  });
  const node = new ClusterNode({
    nodeId: id,
    role: 'all',
    cluster: r.cluster,
    notifications,
    registry,
    logger,
    links,
    ...timing,
  });
  const policies = options.policies
    ? new EndpointPolicies({ registry, events: new PolicyEventLog({ logger }) })
    : undefined;
  node.replica.policies = policies;
  await node.start();
  const test: TestNode = {
    id,
    registry,
    node,
    links,
    notifications,
    repos: r,
    policies,
    async close() {
      await node.close();
      await links.close();
      await notifications.close();
      policies?.close();
    },
  };
  open.push(test);
  return test;
}

/** An agent session of this process; `onClose` plays the session's end (e.g. leave the registry). */
function localSession(onClose?: (session: LocalSession) => void): LocalSession {
  const calls: string[] = [];
  const session: LocalSession = {
    id: newId(ID_PREFIX.tunnelSession),
    credentialId: 'cr_cluster_test',
    ip: '198.51.100.7',
    metadata: 'agent metadata',
    os: 'linux',
    agentVersion: '3.18.4',
    transport: 'ngrok/2',
    startedAt: new Date().toISOString(),
    region: 'eu',
    calls,
    stop() {
      calls.push('stop');
      return Promise.resolve();
    },
    restart() {
      calls.push('restart');
      return Promise.resolve();
    },
    close(reason) {
      calls.push(`close: ${reason}`);
      onClose?.(session);
    },
  };
  return session;
}

/**
 * An https tunnel of `session` at `hostname` whose streams are TCP connections to the echo server.
 * Like an AgentTunnel at claim time, it has no policy yet (a bind attaches it after the claim).
 */
function localTunnel(
  session: OnlineSession,
  hostname: string,
  extra: { pooling?: boolean } = {},
): FakeTunnel {
  return Object.assign(fakeTunnel({ proto: 'https', hostname, upstreamPort: echo.port }), {
    sessionId: session.id,
    ...extra,
  });
}

/** Bring `session` and `tunnel` online on `n` the way a bind does: claim, then addTunnel. */
async function bringOnline(
  n: TestNode,
  session: OnlineSession,
  tunnel: OnlineTunnel,
  policy?: BindTrafficPolicy,
): Promise<void> {
  if (!n.registry.session(session.id)) n.registry.addSession(session);
  expect(await n.node.presence.claim(tunnel, policy, undefined)).toBeUndefined();
  n.registry.addTunnel(tunnel);
}

/** Resolves once `check` holds (polled every 10 ms); fails the test after `ms`. */
async function until(what: string, check: () => boolean | Promise<boolean>, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The stand-in `n` holds for `hostname`, once it holds one of `node`'s. */
async function standInAt(n: TestNode, hostname: string, node: string): Promise<OnlineTunnel> {
  await until(
    `${n.id} shows ${node}'s ${hostname}`,
    () => n.registry.byHost(hostname)?.node === node,
    2000,
  );
  return n.registry.byHost(hostname)!;
}

/** Write `text` to `stream` and read as many bytes back. */
function exchange(stream: Duplex, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    stream.on('data', (chunk: Buffer) => {
      got += chunk.toString();
      if (got.length >= text.length) resolve(got);
    });
    stream.once('error', reject);
    stream.once('close', () => reject(new Error(`stream closed after ${JSON.stringify(got)}`)));
    stream.write(text);
  });
}

/** Run `n`'s heartbeat once, now: the same beat() its timer runs (parked in these tests). */
function heartbeatNow(n: TestNode): Promise<void> {
  return (n.node as unknown as { beat(): Promise<void> }).beat();
}

describe('ClusterNode', () => {
  it("shows another node's session and tunnel within 1 s by its notice, and forgets them", async () => {
    // Heartbeats parked: nothing but the 'online' notice can bring the change to B.
    const a = await startNode('a', 0, PARKED);
    const b = await startNode('b', 1, PARKED);
    const session = localSession();
    const tunnel = localTunnel(session, 'app.example.com');
    await bringOnline(a, session, tunnel);

    const standIn = await standInAt(b, 'app.example.com', a.id);
    expect(standIn).toBeInstanceOf(RemoteTunnel);
    expect(standIn).toMatchObject({
      id: tunnel.id,
      sessionId: session.id,
      bindId: tunnel.bindId,
      proto: 'https',
      url: tunnel.url,
      forwardsTo: tunnel.forwardsTo,
    });
    const remoteSession = b.registry.session(session.id);
    expect(remoteSession).toMatchObject({
      node: a.id,
      credentialId: session.credentialId,
      ip: session.ip,
      os: 'linux',
      agentVersion: '3.18.4',
      region: 'eu',
    });
    // A's own registry has no stand-ins of itself.
    expect(a.registry.byHost('app.example.com')).toBe(tunnel);
    expect(a.node.replica.size).toEqual({ sessions: 0, tunnels: 0 });

    a.registry.removeTunnel(tunnel.id);
    await until('B forgets the tunnel', () => !b.registry.byHost('app.example.com'), 1000);
    expect(b.registry.session(session.id)?.node).toBe(a.id);
    a.registry.removeSession(session.id);
    await until('B forgets the session', () => !b.registry.session(session.id), 1000);
    expect(b.node.replica.size).toEqual({ sessions: 0, tunnels: 0 });
  });

  it("reaches the other node's tunnel over the node link, with the ProxyInfo unchanged", async () => {
    const a = await startNode('a', 0, FAST);
    const b = await startNode('b', 1, FAST);
    const session = localSession();
    const tunnel = localTunnel(session, 'echo.example.com');
    await bringOnline(a, session, tunnel);
    const standIn = await standInAt(b, 'echo.example.com', a.id);

    const info: ProxyInfo = {
      clientAddr: '[2001:db8::7]:45678',
      proto: 'tls',
      edgeType: '2',
      passthroughTls: true,
      // For PROXY protocol headers (ProxyProto), written by the holding node.
      serverAddr: '[2001:db8::1]:443',
    };
    const stream = await standIn.connect(info);
    try {
      expect(await exchange(stream, 'hello across the cluster')).toBe('hello across the cluster');
    } finally {
      stream.destroy();
    }
    expect(tunnel.connects).toEqual([info]);
    expect(b.links.linkCount).toBe(1);
  });

  it('gives a name to one holder in the cluster, and lets a resumed session take it over', async () => {
    const a = await startNode('a', 0, FAST);
    const b = await startNode('b', 1, FAST);
    // The agent's session on A ends when it is closed, as an AgentSession does.
    const held = localSession((s) => a.registry.removeSession(s.id));
    await bringOnline(a, held, localTunnel(held, 'claimed.example.com'));

    const resumed = localSession();
    b.registry.addSession(resumed);
    const mine = localTunnel(resumed, 'claimed.example.com');
    expect(await b.node.presence.claim(mine, undefined, undefined)).toEqual({
      sessionId: held.id,
    });
    expect(held.calls).toEqual([]);

    // The agent resumed `held` on B: B takes the name, and A is told to close the old session.
    expect(await b.node.presence.claim(mine, undefined, held.id)).toBeUndefined();
    b.registry.addTunnel(mine, { takeoverFrom: held.id });
    expect(b.registry.byHost('claimed.example.com')).toBe(mine);
    await until('A closes the resumed session', () => held.calls.length > 0, 1000);
    expect(held.calls).toEqual(['close: the agent resumed on another node']);
    // And A now routes the name to B.
    await standInAt(a, 'claimed.example.com', b.id);
    const rows = await repos[0].cluster.online();
    expect(rows.tunnels.filter((t) => t.routeKey === 'h:claimed.example.com')).toEqual([
      expect.objectContaining({ id: mine.id, nodeId: b.id, sessionId: resumed.id }),
    ]);
  });

  it('pools one name across nodes, round robin over both', async () => {
    const a = await startNode('a', 0, FAST);
    const b = await startNode('b', 1, FAST);
    const sa = localSession();
    const ta = localTunnel(sa, 'pool.example.com', { pooling: true });
    await bringOnline(a, sa, ta);
    await standInAt(b, 'pool.example.com', a.id);

    const sb = localSession();
    const tb = localTunnel(sb, 'pool.example.com', { pooling: true });
    await bringOnline(b, sb, tb);

    const head = b.registry.byHost('pool.example.com')!;
    expect(
      b.registry
        .poolOf(head)
        .map((t) => t.id)
        .sort(),
    ).toEqual([ta.id, tb.id].sort());
    const picks = [1, 2, 3, 4].map(() => b.registry.pick(head).id);
    expect(new Set(picks)).toEqual(new Set([ta.id, tb.id]));
    expect(picks[0]).not.toBe(picks[1]);
    expect(picks[2]).toBe(picks[0]);
    expect(picks[3]).toBe(picks[1]);
    // A pools over both as well, once it loaded B's member.
    await until(
      "A's pool has B's member",
      () => a.registry.poolOf(a.registry.byHost('pool.example.com')!).length === 2,
      2000,
    );
    // A tunnel that does not pool is refused the name while both are online.
    const sc = localSession();
    b.registry.addSession(sc);
    const tc = localTunnel(sc, 'pool.example.com');
    expect(await b.node.presence.claim(tc, undefined, undefined)).toBeDefined();
  });

  it("runs another node's tunnel's policy on the receiving node, or does not serve it", async () => {
    const a = await startNode('a', 0, FAST);
    const b = await startNode('b', 1, FAST, { policies: true });
    const text = 'on_http_request:\n  - actions:\n      - type: deny\n';
    const policy: BindTrafficPolicy = {
      text,
      policy: compileBindPolicy(text, 'https', 'TrafficPolicy'),
    };
    const session = localSession();
    const tunnel = localTunnel(session, 'guarded.example.com');
    await bringOnline(a, session, tunnel, policy);

    const standIn = (await standInAt(b, 'guarded.example.com', a.id)) as RemoteTunnel;
    expect(standIn.policySource).toBe(text);
    expect(standIn.policy?.runner).toBeDefined();
    expect(standIn.policy?.endpoint.host).toBe('guarded.example.com');
    // What the API of B shows for the tunnel: the agent's own policy text.
    expect(standIn.trafficPolicy).toBe(text);

    // A row whose policy B cannot compile: its session is shown, the tunnel is not served.
    const sessionId = newId(ID_PREFIX.tunnelSession);
    const tunnelId = newId(ID_PREFIX.tunnel);
    await repos[0].cluster.putSession({
      id: sessionId,
      nodeId: a.id,
      credentialId: 'cr_cluster_test',
      data: {},
    });
    await repos[0].cluster.claimTunnel({
      id: tunnelId,
      sessionId,
      nodeId: a.id,
      routeKey: 'h:broken.example.com',
      pooling: false,
      data: {
        bindId: tunnelId,
        proto: 'https',
        url: 'https://broken.example.com',
        hostname: 'broken.example.com',
        forwardsTo: 'localhost:1',
        metadata: '',
        startedAt: new Date().toISOString(),
        policySource: 'not: [valid',
      },
    });
    await b.node.replica.resync();
    expect(b.registry.session(sessionId)?.node).toBe(a.id);
    expect(b.registry.tunnel(tunnelId)).toBeUndefined();
    expect(b.registry.byHost('broken.example.com')).toBeUndefined();
    await b.node.replica.resync();
    expect(b.registry.tunnel(tunnelId)).toBeUndefined();
    // The valid one is still served.
    expect(b.registry.byHost('guarded.example.com')).toBe(standIn);
  });

  it('carries stop, restart and close of a stand-in session to the node that holds it', async () => {
    const a = await startNode('a', 0, FAST);
    const b = await startNode('b', 1, FAST);
    const session = localSession();
    await bringOnline(a, session, localTunnel(session, 'commands.example.com'));
    await standInAt(b, 'commands.example.com', a.id);
    const remote = b.registry.session(session.id)!;
    expect(remote.node).toBe(a.id);

    await remote.stop();
    await until('A stops the session', () => session.calls.length === 1, 1000);
    await remote.restart();
    await until('A restarts the session', () => session.calls.length === 2, 1000);
    remote.close('closed through the API of B');
    await until('A closes the session', () => session.calls.length === 3, 1000);
    expect(session.calls).toEqual(['stop', 'restart', 'close: closed through the API of B']);
  });

  it('forgets a node that stopped beating, within its timeout and a heartbeat', async () => {
    // A's timer is parked: it joined (one heartbeat) and never beats again, without leaving.
    const aJoined = Date.now();
    const a = await startNode('a', 0, PARKED);
    const b = await startNode('b', 1, FAST);
    const session = localSession();
    await bringOnline(a, session, localTunnel(session, 'dying.example.com'));
    const standIn = await standInAt(b, 'dying.example.com', a.id);
    // A link to A is open, to be closed with it.
    (
      await standIn.connect({
        clientAddr: '1.2.3.4:5',
        proto: 'https',
        edgeType: '',
        passthroughTls: false,
      })
    ).destroy();
    expect(b.links.linkCount).toBe(1);

    await until(
      'B forgets A',
      () => !b.registry.byHost('dying.example.com') && !b.registry.session(session.id),
      FAST.timeoutMs + FAST.heartbeatMs + 1500,
    );
    // Not before A's heartbeat was older than the timeout.
    expect(Date.now() - aJoined).toBeGreaterThanOrEqual(FAST.timeoutMs);
    const nodes = await repos[1].cluster.nodes();
    expect(nodes.map((n) => n.id)).toEqual([b.id]);
    expect((await repos[1].cluster.online()).sessions).toEqual([]);
    expect(b.links.linkCount).toBe(0);
  });

  it('registers again and republishes its rows when it finds itself reaped', async () => {
    const a = await startNode('a', 0, PARKED);
    const b = await startNode('b', 1, PARKED);
    const session = localSession();
    const tunnel = localTunnel(session, 'paused.example.com');
    await bringOnline(a, session, tunnel);
    await standInAt(b, 'paused.example.com', a.id);

    // Another node reaped A while it was paused: its node row goes, its rows with it.
    await stores[1].db.deleteFrom('nodes').where('id', '=', a.id).execute();
    expect(await repos[1].cluster.online({ exceptNode: b.id })).toEqual({
      sessions: [],
      tunnels: [],
    });
    await b.node.replica.resync();
    expect(b.registry.byHost('paused.example.com')).toBeUndefined();
    expect(b.registry.session(session.id)).toBeUndefined();

    // A's next heartbeat finds its row gone: it joins again and writes everything back.
    await heartbeatNow(a);
    expect((await repos[0].cluster.nodes()).map((n) => n.id)).toContain(a.id);
    const online = await repos[0].cluster.online({ exceptNode: b.id });
    expect(online.sessions.map((s) => [s.id, s.nodeId])).toEqual([[session.id, a.id]]);
    expect(online.tunnels.map((t) => [t.id, t.nodeId, t.routeKey])).toEqual([
      [tunnel.id, a.id, 'h:paused.example.com'],
    ]);
    // B learns it from A's notice (its own heartbeat is parked).
    await standInAt(b, 'paused.example.com', a.id);
    expect(b.registry.session(session.id)?.node).toBe(a.id);
    expect(a.node.presence.dirty).toBe(false);
  });
});
