import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { spawnNgrokAgent, type NgrokAgent } from './support/ngrok-agents.js';
import {
  createAuthtoken,
  hostGet,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';

/**
 * The unmodified @ngrok/ngrok agent (ngrok-rust) at full speed: its socket runs Nagle's algorithm,
 * so a response it writes right after a small frame (its window update for the request) waits
 * until that frame is acknowledged. If the edge leaves the acknowledgement to the kernel's delayed
 * ACK, every response waits about 40 ms (docs/benchmarks.md, "The 40 ms stall"). 50 sequential
 * keep-alive requests then take 2 s or more; without the stall they take a few ms each.
 */
describe('@ngrok/ngrok as agent: no delayed-ACK stall on sequential keep-alive requests', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let agent: NgrokAgent;

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    web = await startHttpUpstream((_req, res) => res.end('hello, world'));
    agent = await spawnNgrokAgent({
      addr: `127.0.0.1:${edge.ports.agent}`,
      ca: edge.caPem,
      token: await createAuthtoken(edge.api),
      to: `http://127.0.0.1:${web.port}`,
      listener: `session.httpEndpoint().scheme('HTTP')`,
    });
  }, 60_000);
  afterAll(async () => {
    agent?.child.kill('SIGKILL');
    await web?.close();
    await edge?.server.stop(20_000);
    await edge?.db.drop();
  });

  it('50 requests on one connection complete far below 50 × 40 ms', async () => {
    const host = new URL(agent.url).hostname;
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // Warm the connection and the edge's stream pool first.
      for (let i = 0; i < 5; i++) {
        expect((await hostGet(edge.ports.http, host, '/', keepAlive)).body).toBe('hello, world');
      }
      const started = performance.now();
      let reused = 0;
      for (let i = 0; i < 50; i++) {
        const res = await hostGet(edge.ports.http, host, '/', keepAlive);
        expect(res.status).toBe(200);
        if (res.reused) reused++;
      }
      const total = performance.now() - started;
      expect(reused).toBe(50);
      // With the stall this is ≥ 2,000 ms; without it, tens of ms. The bound leaves a 2× margin
      // below the stall for a loaded machine, so it tells the stall apart, not a speed target.
      expect(total).toBeLessThan(1000);
      // The edge's own share of each request is in /metrics, for operators to watch.
      const metrics = await (await fetch(`${edge.server.url}/metrics`)).text();
      const count = metrics
        .split('\n')
        .find((l) => l.startsWith('burrow_http_edge_duration_seconds_count{') && l.includes(host));
      expect(Number(count?.slice(count.lastIndexOf(' ') + 1))).toBeGreaterThanOrEqual(55);
    } finally {
      keepAlive.destroy();
    }
  });
});
