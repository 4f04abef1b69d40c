/**
 * API benchmark: throughput and latency of a real `burrow server` (SQLite by default,
 * `--postgres` for PostgreSQL), measured with autocannon, then paging through 100,000 TCP edges.
 *
 *   npm run bench:api                       # SQLite
 *   npm run bench:api -- --postgres         # PostgreSQL at BURROW_TEST_PG (default 127.0.0.1:5432)
 *   npm run bench:api -- --duration 5 --edges 20000 --connections 10 --log-level info
 *
 * Needs `npm run build` first (the server is the compiled CLI). Prints Markdown tables; the figures
 * in docs/benchmarks.md come from it.
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import autocannon, { type Result } from 'autocannon';
import { openStore } from '../src/store/index.js';
import { createTestDatabase } from '../test/support/stores.js';
import { createApiKey, startBurrowServer } from '../test/support/server-process.js';
import { databaseVersion, insertTcpEdges } from './bulk-edges.js';
import { fmt, markdownTable, percentile } from './report.js';

const { values: opts } = parseArgs({
  options: {
    postgres: { type: 'boolean', default: false },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '10' },
    edges: { type: 'string', default: '100000' },
    'log-level': { type: 'string', default: 'warn' },
  },
});
const DURATION = Number(opts.duration);
const CONNECTIONS = Number(opts.connections);
const EDGES = Number(opts.edges);
const WARMUP_SECONDS = 2;

/** The TCP sample policy of the API docs: what a realistic edge carries. */
const POLICY = JSON.stringify({
  on_tcp_connect: [
    {
      name: 'Block IP',
      expressions: ["conn.client_ip == '192.0.2.0'"],
      actions: [{ type: 'deny' }],
    },
  ],
});

async function main(): Promise<void> {
  const kind = opts.postgres ? 'postgres' : 'sqlite';
  const db = await createTestDatabase(kind);
  const server = await startBurrowServer(db, {
    args: ['--api-rate-limit', '0', '--log-level', opts['log-level']],
    discardLogs: true,
  });
  const store = await openStore({ database: db.database, dataDir: db.dataDir });
  try {
    const key = await createApiKey(db);
    const headers = {
      authorization: `Bearer ${key}`,
      'service-version': '2',
      'content-type': 'application/json',
    };
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json: unknown = await res.json();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json as Record<string, unknown>;
    };

    const cpu = cpus();
    console.log(`# Burrow API benchmark: ${await databaseVersion(store)}`);
    console.log(
      `machine: ${cpu.length} x ${cpu[0]?.model.trim()}, ${fmt(totalmem() / 2 ** 30, 1)} GiB; Node ${process.version}; load average at start ${loadavg()
        .map((l) => fmt(l, 1))
        .join(' / ')}`,
    );
    console.log(
      `autocannon: ${CONNECTIONS} connections, ${DURATION} s per run after ${WARMUP_SECONDS} s warm-up; server --log-level ${opts['log-level']}, --api-rate-limit 0\n`,
    );

    const backend = await call('POST', '/backends/tunnel_group', { labels: { app: 'bench' } });
    const edgeBody = {
      description: 'bench edge',
      metadata: '{"source": "bench"}',
      backend: { backend_id: backend.id },
      traffic_policy: { value: POLICY },
    };
    let oneEdge = '';
    for (let i = 0; i < 100; i++) oneEdge = String((await call('POST', '/edges/tcp', edgeBody)).id);

    const runs: Array<[string, Result]> = [];
    const measure = async (
      label: string,
      path: string,
      method: 'GET' | 'POST' = 'GET',
      body?: string,
    ) => {
      const base = { url: `${server.url}${path}`, method, headers, body, connections: CONNECTIONS };
      await autocannon({ ...base, duration: WARMUP_SECONDS });
      const result = await autocannon({ ...base, duration: DURATION });
      if (result.non2xx > 0 || result.errors > 0) {
        throw new Error(`${label}: ${result.non2xx} non-2xx replies, ${result.errors} errors`);
      }
      runs.push([label, result]);
      console.error(`  ${label}: ${fmt(result.requests.average)} req/s`);
    };

    await measure('GET /edges/tcp/{id}', `/edges/tcp/${oneEdge}`);
    await measure('GET /edges/tcp?limit=100 (100 edges)', '/edges/tcp?limit=100');
    await measure('POST /edges/tcp', '/edges/tcp', 'POST', JSON.stringify(edgeBody));
    await measure('GET /bot_users?limit=100 (0 items)', '/bot_users?limit=100');

    const inserted = await insertTcpEdges(store, EDGES, String(backend.id), POLICY);
    const total = Number(
      (
        await store.db
          .selectFrom('edges')
          .select((e) => e.fn.countAll().as('n'))
          .executeTakeFirst()
      )?.n,
    );
    console.error(`  inserted ${fmt(EDGES)} edges in ${fmt(inserted)} ms`);

    // Walk every page the way a client does: follow next_page_uri, one request at a time.
    const pageMs: number[] = [];
    const ids: string[] = [];
    let next: string | null = `${server.url}/edges/tcp?limit=100`;
    const walkStarted = performance.now();
    while (next) {
      const started = performance.now();
      const res = await fetch(next, { headers });
      const page = (await res.json()) as {
        tcp_edges: Array<{ id: string }>;
        next_page_uri: string | null;
      };
      pageMs.push(performance.now() - started);
      if (!res.ok) throw new Error(`paging: ${res.status} ${JSON.stringify(page)}`);
      for (const edge of page.tcp_edges) ids.push(edge.id);
      next = page.next_page_uri;
    }
    const walkMs = performance.now() - walkStarted;
    if (ids.length !== total || new Set(ids).size !== total) {
      throw new Error(
        `paging returned ${ids.length} ids (${new Set(ids).size} distinct) of ${total}`,
      );
    }

    await measure(`GET /edges/tcp?limit=100 (first page of ${fmt(total)})`, '/edges/tcp?limit=100');
    // A page near the end of the list: the 100 edges before the 200th-oldest one.
    const deepId = ids[ids.length - 200]!;
    await measure(
      `GET /edges/tcp?limit=100&before_id=<old> (${fmt(total)})`,
      `/edges/tcp?limit=100&before_id=${deepId}`,
    );

    console.log('## Throughput and latency\n');
    console.log(
      markdownTable(
        ['request', 'req/s', 'p50 ms', 'p99 ms', 'requests'],
        runs.map(([label, r]) => [
          label,
          fmt(r.requests.average),
          fmt(r.latency.p50, 1),
          fmt(r.latency.p99, 1),
          fmt(r.requests.total),
        ]),
      ),
    );
    const sorted = [...pageMs].sort((a, b) => a - b);
    console.log(`\n## Paging through ${fmt(total)} TCP edges (limit=100, one client)\n`);
    console.log(
      markdownTable(
        ['bulk insert', 'pages', 'total s', 'pages/s', 'edges/s', 'p50 ms', 'p99 ms', 'max ms'],
        [
          [
            `${fmt(EDGES)} rows in ${fmt(inserted / 1000, 1)} s`,
            fmt(pageMs.length),
            fmt(walkMs / 1000, 1),
            fmt(pageMs.length / (walkMs / 1000)),
            fmt(total / (walkMs / 1000)),
            fmt(percentile(sorted, 50), 1),
            fmt(percentile(sorted, 99), 1),
            fmt(sorted[sorted.length - 1]!, 1),
          ],
        ],
      ),
    );
  } finally {
    await store.close();
    const code = await server.stop();
    if (code !== 0) console.error(`burrow server exited with ${code}: ${server.stderr()}`);
    await db.drop();
  }
}

await main();
