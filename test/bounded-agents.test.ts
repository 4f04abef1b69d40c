import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  StreamType,
  call,
  openTypedStream,
  readJsonObject,
  type MuxSession,
  type MuxStream,
} from '../src/protocol/index.js';
import { connectTestAgent, expectRpcError } from './support/agent-edge.js';
import type { CurlApi } from './support/curl.js';
import { createAuthtoken, type EdgePorts, startEdgeServer } from './support/edge-listeners.js';
import { metricSum } from './support/ingress.js';
import type { BurrowServer } from './support/server-process.js';
import type { TestDatabase } from './support/stores.js';

/**
 * Issue 36, as a hostile agent does it, against a real `burrow server` process with a small heap:
 * what one authtoken's session makes the edge hold has a total bound (docs/security.md,
 * "Budgets"). Each attack took the process down, or its memory far up, before the bound.
 */

/** A 110 KB traffic policy: 90 rules, each answering with a 1 KB body. */
const BIG_POLICY = `on_http_request:\n${Array.from(
  { length: 90 },
  (_, i) =>
    `  - name: r${i}\n    expressions: ["req.url.path.startsWith('/p${i}')"]\n    actions: [{type: custom-response, config: {status_code: 200, body: "${'b'.repeat(1150)}"}}]\n`,
).join('')}`;

/** An agent made of the protocol library (what the Burrow SDK speaks), with heartbeats on. */
async function rawAgent(port: number, caPem: string, token: string): Promise<MuxSession> {
  const agent = await connectTestAgent({ listener: { port }, caPem });
  agent.heartbeat(1000);
  await agent.auth({ AuthToken: token });
  return agent.mux;
}

/** The server's resident memory, from /proc. */
function rssBytes(server: BurrowServer): number {
  const status = readFileSync(`/proc/${server.process.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** One series of /metrics (the sum of its labelled lines). */
async function metric(api: CurlApi, name: string, labels = ''): Promise<number> {
  return metricSum((await api.get('/metrics')).text, name, labels);
}

describe('one authtoken cannot run the edge out of memory', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caPem: string;
  const agents: MuxSession[] = [];
  const agent = async (): Promise<MuxSession> => {
    const mux = await rawAgent(ports.agent, caPem, await createAuthtoken(api));
    agents.push(mux);
    return mux;
  };

  beforeAll(async () => {
    // 192 MB of old space: the policy churn below grew the heap by ~108 MB per 1,000 cycles.
    ({ db, ports, server, api, caPem } = await startEdgeServer('sqlite', [], {
      nodeFlags: ['--max-old-space-size=192'],
    }));
  }, 60_000);
  afterAll(async () => {
    for (const mux of agents) mux.destroy();
    await server?.stop(20_000);
    await db?.drop();
  });

  it('survives 3,000 bind/unbind cycles of a 110 KB policy from one session, its heap bounded', async () => {
    const mux = await agent();
    for (let i = 0; i < 3000; i++) {
      // No Id: each bind is a bind of its own, whose state the edge used to keep for 5 minutes.
      const bound = await call(mux, StreamType.Bind, {
        Id: '',
        Proto: 'https',
        ForwardsTo: 'localhost:3000',
        Opts: { TrafficPolicy: BIG_POLICY },
        Extra: {},
      });
      await call(mux, StreamType.Unbind, { Id: bound.Id });
    }
    expect(server.process.exitCode).toBeNull();
    expect((await api.get('/tunnels')).body.tunnels).toEqual([]);
    // The kept states are bounded by count and bytes; the policy is compiled and kept once.
    expect(await metric(api, 'burrow_policy_states', '{state="live"}')).toBe(0);
    expect(await metric(api, 'burrow_policy_state_bytes', '{state="live"}')).toBe(0);
    const retainedBytes = await metric(api, 'burrow_policy_state_bytes', '{state="retained"}');
    expect(retainedBytes).toBeLessThanOrEqual(128 * 1024 * 1024);
  }, 300_000);

  it('refuses Bind requests past the session budget of bytes in progress, RSS low', async () => {
    const mux = await agent();
    const rssBefore = rssBytes(server);
    // 800 Binds, each ~1 MB of JSON never finished: within the 1 MiB request limit each.
    const head = '{"Id":"","Proto":"https","ForwardsTo":"x","Opts":{"TrafficPolicy":"';
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const streams: MuxStream[] = [];
    for (let i = 0; i < 800; i++) {
      const stream = openTypedStream(mux, StreamType.Bind, Buffer.from(head));
      stream.on('error', () => undefined);
      for (let k = 0; k < 15; k++) stream.write(chunk);
      streams.push(stream);
    }
    // An answered request's stream is dropped: the rest of its megabyte need not cross.
    const replies = await Promise.all(
      streams.map((s) =>
        readJsonObject(s, { timeoutMs: 120_000 })
          .then(
            (reply) => (reply as { Error?: string }).Error ?? '',
            (err: Error) => `no reply: ${err.message}`,
          )
          .finally(() => s.destroy()),
      ),
    );
    const refused = replies.filter((e) => e.includes('ERR_BURROW_AGENT_RPC_BYTES')).length;
    // 4 MiB per session admits four ~1 MB requests; every later one is refused at once.
    expect(refused).toBeGreaterThanOrEqual(795);
    expect(rssBytes(server) - rssBefore).toBeLessThan(200e6);
    expect(
      await metric(api, 'burrow_limit_refusals_total', '{limit="agent_rpc_bytes_per_session"}'),
    ).toBe(refused);
    await expect
      .poll(() => metric(api, 'burrow_agent_rpc_pending_bytes'), { timeout: 20_000 })
      .toBe(0);
  }, 300_000);

  it('refuses PatchTunnelState with 1,000,000 bytes of Metadata, naming the field and limit', async () => {
    const mux = await agent();
    const bound = await call(mux, StreamType.Bind, {
      Id: '',
      Proto: 'https',
      ForwardsTo: 'localhost:3000',
      Opts: {},
      Extra: { Metadata: 'small' },
    });
    const err = await expectRpcError(
      call(mux, StreamType.PatchTunnelState, {
        TunnelId: bound.Id,
        Metadata: 'm'.repeat(1_000_000),
      }),
    );
    expect(err.errorCode).toBe('ERR_NGROK_801');
    expect(err.message).toMatch(/PatchTunnelState: Metadata is 1000000 bytes; the limit is 4096/);
    const tunnels = (await api.get('/tunnels')).body.tunnels as { metadata: string }[];
    expect(tunnels.map((t) => t.metadata)).toEqual(['small']);
    // Within the limit it still changes.
    await call(mux, StreamType.PatchTunnelState, {
      TunnelId: bound.Id,
      Metadata: 'm'.repeat(4096),
    });
    const after = (await api.get('/tunnels')).body.tunnels as { metadata: string }[];
    expect(after[0]!.metadata).toHaveLength(4096);
  }, 60_000);
});
