/**
 * What edges that merely exist cost a cluster (issue 35): two `burrow server --role all` nodes on
 * one PostgreSQL database, with 0, 10,000 and 100,000 serving TLS edges in the store (a reserved
 * domain each, a tunnel-group backend, no traffic), measured from outside:
 *
 * - each node's idle CPU (user + system from /proc/<pid>/stat, ms per second) and RSS;
 * - the database's transactions per second while both nodes idle (`pg_stat_database`);
 * - edges created one after another through node A's API, and how long node B's API takes to
 *   list each one (it reads the store: what this shows is the write path, not notification);
 * - each node's start: spawn to `/healthz`, and the CPU it used by then.
 *
 * Edges beyond those made through the API are written straight into the database while the nodes
 * are stopped. Usage: `npm run build && node --import tsx bench/idle-cluster.ts`;
 * `SIZES=0,10000,100000`, `IDLE_S=15`, `CREATE=20` change the load.
 */
import pg from 'pg';
import { ID_PREFIX, newId } from '../src/core/ids.js';
import { createTestDatabase, type TestDatabase } from '../test/support/stores.js';
import {
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
} from '../test/support/server-process.js';
import { processCpuMs, processRss } from './edge-process.js';

const SIZES = (process.env.SIZES ?? '0,10000,100000').split(',').map(Number);
const IDLE_S = Number(process.env.IDLE_S ?? 15);
const CREATE = Number(process.env.CREATE ?? 20);
const SETTLE_MS = 5000;
const NODES = { a: '127.0.0.2', b: '127.0.0.3' } as const;
type NodeName = keyof typeof NODES;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Cluster {
  db: TestDatabase;
  ports: { agent: number; http: number; https: number };
  nodes: Partial<Record<NodeName, BurrowServer>>;
}

async function startNode(cluster: Cluster, name: NodeName): Promise<number> {
  const ip = NODES[name];
  const { ports } = cluster;
  const started = performance.now();
  cluster.nodes[name] = await startBurrowServer(
    { dataDir: `${cluster.db.dataDir}/${name}`, database: cluster.db.database },
    {
      discardLogs: true,
      timeoutMs: 120_000,
      args: [
        ...['--role', 'all', '--log-level', 'warn', '--node-id', `node-${name}`],
        ...['--node-listen', `${ip}:0`, '--agent-listen', `${ip}:${ports.agent}`],
        ...['--http-listen', `${ip}:${ports.http}`, '--https-listen', `${ip}:${ports.https}`],
        ...['--api-rate-limit', '0'],
      ],
    },
  );
  return performance.now() - started;
}

async function stopNodes(cluster: Cluster): Promise<void> {
  await Promise.all(Object.values(cluster.nodes).map((n) => n.stop(20_000)));
  cluster.nodes = {};
}

/** A call to a node's API; throws unless it succeeded. */
async function call(
  node: BurrowServer,
  key: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ id: string }> {
  const res = await fetch(`http://${node.address}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${key}`,
      'Service-Version': '2',
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as { id: string };
}

/** Serving TLS edges written so far (API and bulk alike), so names never repeat. */
let made = 0;

/** Write serving TLS edges straight into the database, up to `total`, 1,000 per statement. */
async function fillTo(db: TestDatabase, httpsPort: number, backendId: string, total: number) {
  const client = new pg.Client({ connectionString: db.database });
  await client.connect();
  const createdAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const backend = JSON.stringify({ enabled: true, backend_id: backendId });
  try {
    await client.query('begin');
    while (made < total) {
      const rows: { domainId: string; edgeId: string; name: string; hp: string }[] = [];
      for (; made < total && rows.length < 1000;) {
        made++;
        const name = `bulk-${made}.bench.test`;
        const hp = `${name}:${httpsPort}`;
        rows.push({
          domainId: newId(ID_PREFIX.reservedDomain),
          edgeId: newId(ID_PREFIX.tlsEdge),
          name,
          hp,
        });
      }
      await client.query(
        `insert into reserved_domains (id, description, metadata, created_at, domain, region)
         select unnest($1::text[]), '', '{}', $2, unnest($3::text[]), 'us'`,
        [rows.map((r) => r.domainId), createdAt, rows.map((r) => r.name)],
      );
      await client.query(
        `insert into edges (id, type, description, metadata, created_at, hostports, backend)
         select unnest($1::text[]), 'tls', '', '{}', $2, unnest($3::text[]), $4`,
        [rows.map((r) => r.edgeId), createdAt, rows.map((r) => JSON.stringify([r.hp])), backend],
      );
      await client.query(
        `insert into edge_hostports (hostport, edge_id, target_id)
         select unnest($1::text[]), unnest($2::text[]), unnest($3::text[])`,
        [rows.map((r) => r.hp), rows.map((r) => r.edgeId), rows.map((r) => r.domainId)],
      );
      await client.query(
        `insert into refs (from_id, to_id)
         select unnest($1::text[]), unnest($2::text[])`,
        [
          [...rows.map((r) => r.edgeId), ...rows.map((r) => r.edgeId)],
          [...rows.map(() => backendId), ...rows.map((r) => r.domainId)],
        ],
      );
    }
    await client.query('commit');
    // As a store that grew over time would be: planned on fresh statistics, not in the middle
    // of the autovacuum daemon's analyze of half a million new rows (which skews the next run).
    await client.query('analyze');
  } finally {
    await client.end();
  }
}

/** Committed and rolled-back transactions of the database so far. */
async function transactions(db: TestDatabase): Promise<number> {
  const client = new pg.Client({ connectionString: db.database });
  await client.connect();
  try {
    // Counters reach pg_stat_database when a backend reports them; ask for a fresh snapshot.
    await client.query('select pg_stat_clear_snapshot()');
    const res = await client.query<{ n: string }>(
      'select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()',
    );
    return Number(res.rows[0]!.n);
  } finally {
    await client.end();
  }
}

interface Point {
  edges: number;
  startMs: Record<NodeName, number>;
  startCpuMs: Record<NodeName, number>;
  idleMsPerS: Record<NodeName, number>;
  rssMiB: Record<NodeName, number>;
  xactPerS: number;
  createPerS: number;
  listedOnBMs: number;
}

async function measure(
  cluster: Cluster,
  key: string,
  backend: string,
  size: number,
): Promise<Point> {
  const startMs = { a: await startNode(cluster, 'a'), b: await startNode(cluster, 'b') };
  const pid = (n: NodeName) => cluster.nodes[n]!.process.pid!;
  const startCpuMs = { a: processCpuMs(pid('a')), b: processCpuMs(pid('b')) };
  await sleep(SETTLE_MS);
  const cpu0 = { a: processCpuMs(pid('a')), b: processCpuMs(pid('b')) };
  const x0 = await transactions(cluster.db);
  await sleep(IDLE_S * 1000);
  const x1 = await transactions(cluster.db);
  const idleMsPerS = {
    a: (processCpuMs(pid('a')) - cpu0.a) / IDLE_S,
    b: (processCpuMs(pid('b')) - cpu0.b) / IDLE_S,
  };
  const rssMiB = { a: processRss(pid('a')) / 2 ** 20, b: processRss(pid('b')) / 2 ** 20 };
  // One transaction for each of the two reads above is ours; the rest are the nodes'.
  const xactPerS = (x1 - x0 - 1) / IDLE_S;
  const created = performance.now();
  let listedOnBMs = 0;
  for (let i = 0; i < CREATE; i++) {
    const name = `api-${++made}.bench.test`;
    await call(cluster.nodes.a!, key, 'POST', '/reserved_domains', { domain: name });
    const edge = await call(cluster.nodes.a!, key, 'POST', '/edges/tls', {
      hostports: [`${name}:${cluster.ports.https}`],
      backend: { backend_id: backend },
    });
    const t = performance.now();
    await call(cluster.nodes.b!, key, 'GET', `/edges/tls/${edge.id}`);
    listedOnBMs += performance.now() - t;
  }
  const createPerS = CREATE / ((performance.now() - created) / 1000);
  await stopNodes(cluster);
  return {
    edges: size,
    startMs,
    startCpuMs,
    idleMsPerS,
    rssMiB,
    xactPerS,
    createPerS,
    listedOnBMs: listedOnBMs / CREATE,
  };
}

async function main(): Promise<void> {
  const cluster: Cluster = {
    db: await createTestDatabase('postgres'),
    ports: { agent: await freePort(), http: await freePort(), https: await freePort() },
    nodes: {},
  };
  const points: Point[] = [];
  try {
    const key = await createApiKey(cluster.db);
    await startNode(cluster, 'a');
    const backend = await call(cluster.nodes.a!, key, 'POST', '/backends/tunnel_group', {
      labels: { b: 'x' },
    });
    await stopNodes(cluster);
    for (const size of SIZES) {
      await fillTo(cluster.db, cluster.ports.https, backend.id, size);
      const point = await measure(cluster, key, backend.id, size);
      console.log(JSON.stringify(point));
      points.push(point);
    }
  } finally {
    await stopNodes(cluster);
    await cluster.db.drop();
  }
  console.log(
    `\nPostgreSQL, two nodes (--role all), serving TLS edges, no traffic; idle over ${IDLE_S} s ` +
      `after ${SETTLE_MS / 1000} s; ${CREATE} edges created through node A at each size\n`,
  );
  console.log(
    '| edges in store | start A / B (ms) | CPU of the start A / B (ms) | idle CPU A / B (ms/s) | ' +
      'RSS A / B (MiB) | database transactions per s | edges created per s (A) | GET on B of an edge made on A (ms) |',
  );
  console.log('|--:|--:|--:|--:|--:|--:|--:|--:|');
  const pair = (r: Record<NodeName, number>, digits: number) =>
    `${r.a.toFixed(digits)} / ${r.b.toFixed(digits)}`;
  for (const p of points) {
    console.log(
      `| ${p.edges.toLocaleString('en')} | ${pair(p.startMs, 0)} | ${pair(p.startCpuMs, 0)} | ` +
        `${pair(p.idleMsPerS, 1)} | ${pair(p.rssMiB, 0)} | ${p.xactPerS.toFixed(1)} | ` +
        `${p.createPerS.toFixed(1)} | ${p.listedOnBMs.toFixed(1)} |`,
    );
  }
}

await main();
