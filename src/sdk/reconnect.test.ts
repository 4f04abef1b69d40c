import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../edge/sessions/agent-session.js';
import { edgeFixtures } from '../../test/support/edge-fixtures.js';
import { httpRequest, startHttpUpstream, type LocalServer } from '../../test/support/ingress.js';
import { nextEvent, until } from '../../test/support/mux.js';
import { startRelay, startSdkTestEdge, type SdkTestEdge } from '../../test/support/sdk-edge.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import {
  BurrowAgentError,
  connect,
  type ConnectOptions,
  type Endpoint,
  type Session,
} from './index.js';

/** Reconnection, resumption, refusals and remote commands, against a real in-process edge. */

async function refusal(p: Promise<unknown>): Promise<BurrowAgentError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(BurrowAgentError);
    return err as BurrowAgentError;
  }
  throw new Error('expected a refusal');
}

/** Collect the names of a session's events, in order. */
function recordEvents(session: Session): string[] {
  const seen: string[] = [];
  for (const name of [
    'connected',
    'disconnected',
    'reconnecting',
    'stop',
    'restart',
    'close',
  ] as const) {
    session.on(name, () => seen.push(name));
  }
  session.on('error', (err) => seen.push(`error ${err.code}`));
  return seen;
}

describe.each(DATABASE_KINDS)('SDK sessions: reconnects, refusals, commands (%s)', (kind) => {
  let edge: SdkTestEdge;
  let upstream: LocalServer;
  const sessions: Session[] = [];

  const open = async (extra: Partial<ConnectOptions> = {}): Promise<Session> => {
    const session = await connect({
      serverAddr: edge.serverAddr,
      authtoken: await edge.token(),
      ca: edge.caPem,
      heartbeatInterval: 200,
      heartbeatTolerance: 400,
      reconnect: { initialDelay: 50, maxDelay: 500 },
      ...extra,
    });
    sessions.push(session);
    return session;
  };
  const get = (endpoint: Endpoint, path = '/') =>
    httpRequest(edge.httpPort, { host: new URL(endpoint.url!).hostname, path });
  const agentSessionOf = (endpoint: Endpoint): AgentSession => {
    const tunnel = edge.registry.listTunnels().find((t) => t.url === endpoint.url)!;
    return edge.listener.sessions().find((s) => s.id === tunnel.sessionId)!;
  };

  beforeAll(async () => {
    edge = await startSdkTestEdge(kind);
    upstream = await startHttpUpstream((req, res) => res.end(`hello from ${req.url}`));
  });
  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.close();
  });
  afterAll(async () => {
    await upstream.close();
    await edge.close();
  });

  it('comes back with the same URLs after the edge restarts', async () => {
    const session = await open();
    const events = recordEvents(session);
    const web = await session.httpEndpoint({ forward: upstream.port });
    const tcp = await session.tcpEndpoint({ forward: upstream.port });
    const [webUrl, tcpUrl, clientId] = [web.url, tcp.url, session.clientId];
    expect((await get(web, '/before')).body).toBe('hello from /before');

    const reconnected = nextEvent(session, 'connected');
    await edge.restart({ downMs: 300 });
    await reconnected;
    expect(web.url).toBe(webUrl);
    expect(tcp.url).toBe(tcpUrl);
    expect(session.connected).toBe(true);
    expect(session.clientId).not.toBe(clientId); // a new edge process: a new session
    expect((await get(web, '/after')).body).toBe('hello from /after');
    expect(
      edge.registry
        .listTunnels()
        .map((t) => t.url)
        .sort(),
    ).toEqual([webUrl, tcpUrl].sort());
    expect(events[0]).toBe('disconnected');
    expect(events).toContain('reconnecting');
    expect(events.at(-1)).toBe('connected');
  });

  it('reconnects after its TCP connection is cut, resuming the session', async () => {
    const relay = await startRelay(edge.serverAddr);
    const session = await open({ serverAddr: relay.addr });
    const web = await session.httpEndpoint({ forward: upstream.port });
    const url = web.url;
    const before = agentSessionOf(web).id;
    const reconnected = nextEvent(session, 'connected');
    relay.cut();
    const [info] = [await reconnected] as [{ clientId: string; resumed: boolean }];
    expect(info.resumed).toBe(true);
    expect(web.url).toBe(url);
    expect(agentSessionOf(web).id).not.toBe(before);
    expect((await get(web, '/again')).body).toBe('hello from /again');
    await relay.close();
  });

  it('notices a silent connection through missed heartbeats and is back within the tolerance', async () => {
    const relay = await startRelay(edge.serverAddr);
    const session = await open({ serverAddr: relay.addr });
    const web = await session.httpEndpoint({ forward: upstream.port });
    const stale = agentSessionOf(web);
    const lost = nextEvent(session, 'disconnected');
    const reconnected = nextEvent(session, 'connected');
    const frozenAt = Date.now();
    relay.freeze(); // nothing closes: only the heartbeat can tell
    await lost;
    // interval 200 + tolerance 400, measured from the last echo
    expect(Date.now() - frozenAt).toBeLessThan(2000);
    await reconnected;
    expect(Date.now() - frozenAt).toBeLessThan(4000);
    expect(relay.accepted).toBe(2);
    // The resumed session took the URL over from the stale one, which the edge then evicted.
    expect(agentSessionOf(web)).not.toBe(stale);
    expect((await get(web, '/resumed')).body).toBe('hello from /resumed');
    await until(() => stale.gone, 5000);
    await relay.close();
  });

  it('surfaces refusals with the server code and message', async () => {
    const base = { serverAddr: edge.serverAddr, ca: edge.caPem, reconnect: false } as const;
    const malformed = await refusal(connect({ ...base, authtoken: 'garbage' }));
    expect(malformed.code).toBe('ERR_NGROK_105');
    expect(malformed.message).toMatch(/authtoken is malformed/);
    const revoked = await refusal(
      connect({ ...base, authtoken: `${'A'.repeat(27)}_${'b'.repeat(32)}` }),
    );
    expect(revoked.code).toBe('ERR_NGROK_107');
    expect(revoked.errorCode).toBe('ERR_NGROK_107');

    const confined = await open({
      authtoken: await edge.token({ acl: ['bind:*.sitea.example.com'] }),
    });
    const acl = await refusal(confined.httpEndpoint({ domain: 'app.example.com' }));
    expect(acl.code).toBe('ERR_NGROK_316');
    expect(acl.message).toMatch(/does not permit binding this name: 'app\.example\.com'/);
    const notReserved = await refusal((await open()).httpEndpoint({ domain: 'x.example.org' }));
    expect(notReserved.code).toBe('ERR_NGROK_319');
    expect(confined.endpoints).toEqual([]);
  });

  it('reports a TLS failure without a code when the CA is wrong', async () => {
    const other = await startSdkTestEdge('sqlite');
    try {
      const err = await refusal(
        connect({ serverAddr: edge.serverAddr, authtoken: 'x', ca: other.caPem }),
      );
      expect(err.code).toBeUndefined();
      expect(err.message).toMatch(/failed to connect to 127\.0\.0\.1:\d+: .*certificate/i);
    } finally {
      await other.close();
    }
  });

  it('binds a reserved domain and gets it back after a restart', async () => {
    await edgeFixtures(edge.store).reservedDomain(`app-${kind}.example.com`);
    const session = await open();
    const web = await session.httpEndpoint({
      domain: `app-${kind}.example.com`,
      forward: upstream.port,
    });
    expect(web.url).toBe(`https://app-${kind}.example.com:8443`);
    const reconnected = nextEvent(session, 'connected');
    await edge.restart();
    await reconnected;
    expect((await get(web, '/r')).body).toBe('hello from /r');
  });

  it('obeys the Stop and Restart commands of the API', async () => {
    const session = await open();
    const events = recordEvents(session);
    const web = await session.httpEndpoint({ forward: upstream.port });
    const reconnected = nextEvent(session, 'connected');
    await agentSessionOf(web).restart();
    await reconnected;
    expect(events.slice(0, 2)).toEqual(['restart', 'disconnected']);
    expect((await get(web, '/restarted')).body).toBe('hello from /restarted');

    const closed = nextEvent(session, 'close');
    await agentSessionOf(web).stop();
    await closed;
    expect(events).toContain('stop');
    expect(session.closed).toBe(true);
    expect(web.closed).toBe(true);
    await until(() => edge.registry.listTunnels().every((t) => t.url !== web.url));
  });

  it('closes an endpoint the server stops, with the code it gave', async () => {
    const session = await open();
    const web = await session.httpEndpoint({ forward: upstream.port });
    const tunnel = edge.registry.listTunnels().find((t) => t.url === web.url)!;
    const closed = once(web, 'close');
    agentSessionOf(web).stopTunnel(tunnel.id, 'the domain was released', 'ERR_NGROK_3200');
    const [err] = (await closed) as [BurrowAgentError];
    expect(err).toMatchObject({ code: 'ERR_NGROK_3200', message: 'the domain was released' });
    expect(session.endpoints).toEqual([]);
  });

  it('without reconnect, a lost connection closes the session', async () => {
    const session = await open({ reconnect: false });
    const web = await session.httpEndpoint({ forward: upstream.port });
    const closed = nextEvent(session, 'close');
    agentSessionOf(web).mux.destroy();
    await closed;
    expect(web.closed).toBe(true);
  });
});
