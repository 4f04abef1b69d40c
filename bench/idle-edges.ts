/**
 * What edges that merely exist cost one node (issue 35): a real `burrow server --role all` on
 * SQLite with 0, 1,000 and 10,000 serving TLS edges (a reserved domain each, a tunnel-group
 * backend, no traffic), measured from outside:
 *
 * - idle CPU: user + system time from /proc/<pid>/stat over `IDLE_S` seconds, in ms per second,
 *   and the resident set size at its end;
 * - edge creation rate: `CREATE` edges made one after another through the API (POST
 *   /reserved_domains, then POST /edges/tls with its hostport), edges per second;
 * - restart time: from spawning the server to its API answering /healthz, with the edges in store
 *   (the fastest of `STARTS` starts), and the CPU time the server used until then.
 *
 * Edges beyond the ones made through the API are written straight into the database while the
 * server is stopped (rows as the repository writes them), then the server starts again.
 *
 * Usage: `node --import tsx bench/idle-edges.ts`; `TREES=before=/tmp/old,after=/work/main` runs the
 * same steps against several built trees (each with its own `dist/`), one after the other, so a
 * before/after comparison comes from one run on one machine. `SIZES=0,1000,10000`, `IDLE_S=15`,
 * `CREATE=50`, `STARTS=3` change the load.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ID_PREFIX, newId } from '../src/core/ids.js';
import { freePort, REPO_ROOT } from '../test/support/server-process.js';
import { processCpuMs, processRss } from './edge-process.js';

const SIZES = (process.env.SIZES ?? '0,1000,10000').split(',').map(Number);
const IDLE_S = Number(process.env.IDLE_S ?? 15);
const CREATE = Number(process.env.CREATE ?? 50);
/** Starts timed at each size; the fastest is reported (the one least disturbed by other work). */
const STARTS = Number(process.env.STARTS ?? 3);
/** Time to settle after the start before idle CPU is read (timers armed, first GCs done). */
const SETTLE_MS = 5000;

interface Tree {
  name: string;
  root: string;
}

interface Point {
  edges: number;
  restartMs: number;
  /** CPU time (user + system) the server used from its spawn to its API answering. */
  startCpuMs: number;
  idleMsPerS: number;
  rssMiB: number;
  createPerS: number;
  /** Mean ms of POST /reserved_domains and of POST /edges/tls while creating. */
  domainMs: number;
  edgeMs: number;
}

/** Servers started and not yet stopped: killed if the benchmark itself is stopped. */
const running = new Set<ChildProcess>();
for (const signal of ['exit', 'SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of running) child.kill('SIGKILL');
    if (signal !== 'exit') process.exit(1);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function trees(): Tree[] {
  const spec = process.env.TREES ?? `this=${REPO_ROOT}`;
  return spec.split(',').map((entry) => {
    const [name, root] = entry.split('=');
    if (!name || !root) throw new Error(`TREES entries are name=path; got '${entry}'`);
    return { name, root };
  });
}

/** One node's fixed settings, so every restart serves the same ports and hostports. */
interface Node {
  tree: Tree;
  dataDir: string;
  ports: { api: number; agent: number; http: number; https: number };
}

function serverArgs(node: Node): string[] {
  const { dataDir, ports } = node;
  return [
    join(node.tree.root, 'bin', 'burrow.js'),
    'server',
    ...['--data-dir', dataDir, '--role', 'all', '--log-level', 'warn'],
    ...['--api-listen', `127.0.0.1:${ports.api}`, '--api-rate-limit', '0'],
    ...['--agent-listen', `127.0.0.1:${ports.agent}`],
    ...['--http-listen', `127.0.0.1:${ports.http}`],
    ...['--https-listen', `127.0.0.1:${ports.https}`],
    ...['--base-domain', 'burrow.test', '--tcp-host', 'tcp.burrow.test'],
  ];
}

/**
 * Start the server; resolves with the process, how long until /healthz answered, and the CPU time
 * the server had used by then (steadier than the wall clock on a busy machine).
 */
async function start(node: Node): Promise<{ child: ChildProcess; ms: number; cpuMs: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, serverArgs(node), {
    cwd: node.tree.root,
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const res = await fetch(`http://127.0.0.1:${node.ports.api}/healthz`);
      if (res.ok)
        return { child, ms: performance.now() - started, cpuMs: processCpuMs(child.pid!) };
    } catch {
      // Not listening yet.
    }
    await sleep(20);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

function apiKey(node: Node): Promise<string> {
  const child = spawn(
    process.execPath,
    [join(node.tree.root, 'bin', 'burrow.js'), 'api-key', 'create', '--data-dir', node.dataDir],
    { cwd: node.tree.root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  return once(child, 'exit').then(() => out.trim());
}

/** A JSON call to the node's API; throws unless it succeeded. */
async function call(node: Node, key: string, path: string, body: unknown): Promise<{ id: string }> {
  const res = await fetch(`http://127.0.0.1:${node.ports.api}${path}`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${key}`,
      'Service-Version': '2',
      'Content-Type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as { id: string };
}

/** Serving TLS edges made so far, per node (API and bulk alike). */
const made = new Map<Node, number>();

/** How long making edges through the API took: per edge, and its two calls apart (ms). */
interface Creation {
  perS: number;
  domainMs: number;
  edgeMs: number;
}

/** Make `count` edges through the API, one after another. */
async function createThroughApi(
  node: Node,
  key: string,
  backendId: string,
  count: number,
): Promise<Creation> {
  const started = performance.now();
  let domainMs = 0;
  let edgeMs = 0;
  for (let i = 0; i < count; i++) {
    const n = (made.get(node) ?? 0) + 1;
    made.set(node, n);
    const domain = `api-${n}.bench.test`;
    const t0 = performance.now();
    await call(node, key, '/reserved_domains', { domain });
    const t1 = performance.now();
    await call(node, key, '/edges/tls', {
      hostports: [`${domain}:${node.ports.https}`],
      backend: { backend_id: backendId },
    });
    domainMs += t1 - t0;
    edgeMs += performance.now() - t1;
  }
  const perS = count / ((performance.now() - started) / 1000);
  return { perS, domainMs: domainMs / count, edgeMs: edgeMs / count };
}

/** Add serving TLS edges straight into the stopped node's database, up to `total`. */
function fillTo(node: Node, backendId: string, total: number): void {
  const db = new Database(join(node.dataDir, 'burrow.db'));
  const createdAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const domain = db.prepare(
    `insert into reserved_domains (id, description, metadata, created_at, domain, region,
     cname_target, acme_challenge_cname_target, certificate_management_policy,
     certificate_management_status, certificate_id)
     values (?, '', '{}', ?, ?, 'us', null, null, null, null, null)`,
  );
  const edge = db.prepare(
    `insert into edges (id, type, description, metadata, created_at, hostports, backend,
     ip_restriction, traffic_policy, mutual_tls, tls_termination)
     values (?, 'tls', '', '{}', ?, ?, ?, null, null, null, null)`,
  );
  const hostport = db.prepare(
    'insert into edge_hostports (hostport, edge_id, target_id) values (?, ?, ?)',
  );
  const ref = db.prepare('insert into refs (from_id, to_id) values (?, ?)');
  const backend = JSON.stringify({ enabled: true, backend_id: backendId });
  db.transaction(() => {
    for (let n = (made.get(node) ?? 0) + 1; n <= total; n++) {
      const domainId = newId(ID_PREFIX.reservedDomain);
      const edgeId = newId(ID_PREFIX.tlsEdge);
      const name = `bulk-${n}.bench.test`;
      const hp = `${name}:${node.ports.https}`;
      domain.run(domainId, createdAt, name);
      edge.run(edgeId, createdAt, JSON.stringify([hp]), backend);
      hostport.run(hp, edgeId, domainId);
      ref.run(edgeId, backendId);
      ref.run(edgeId, domainId);
    }
  })();
  db.close();
  made.set(node, Math.max(made.get(node) ?? 0, total));
}

async function idleCpu(child: ChildProcess): Promise<number> {
  await sleep(SETTLE_MS);
  const before = processCpuMs(child.pid!);
  await sleep(IDLE_S * 1000);
  return (processCpuMs(child.pid!) - before) / IDLE_S;
}

async function measure(tree: Tree): Promise<Point[]> {
  const node: Node = {
    tree,
    dataDir: mkdtempSync(join(tmpdir(), `burrow-idle-edges-${tree.name}-`)),
    ports: { api: await freePort(), agent: await freePort(), http: 0, https: 0 },
  };
  node.ports.http = await freePort();
  node.ports.https = await freePort();
  const points: Point[] = [];
  try {
    const key = await apiKey(node);
    let backendId = '';
    for (const size of SIZES) {
      if (size > 0 && backendId !== '') fillTo(node, backendId, size);
      let ms = Infinity;
      let startCpuMs = Infinity;
      for (let i = 1; i < STARTS; i++) {
        const timed = await start(node);
        ms = Math.min(ms, timed.ms);
        startCpuMs = Math.min(startCpuMs, timed.cpuMs);
        await stop(timed.child);
      }
      const last = await start(node);
      const child = last.child;
      ms = Math.min(ms, last.ms);
      startCpuMs = Math.min(startCpuMs, last.cpuMs);
      try {
        if (backendId === '') {
          backendId = (await call(node, key, '/backends/tunnel_group', { labels: { b: 'x' } })).id;
        }
        const idleMsPerS = await idleCpu(child);
        const rssMiB = processRss(child.pid!) / 2 ** 20;
        const created = await createThroughApi(node, key, backendId, CREATE);
        const point: Point = {
          edges: size,
          restartMs: ms,
          startCpuMs,
          idleMsPerS,
          rssMiB,
          createPerS: created.perS,
          domainMs: created.domainMs,
          edgeMs: created.edgeMs,
        };
        console.log(JSON.stringify({ tree: tree.name, ...point }));
        points.push(point);
      } finally {
        await stop(child);
      }
    }
  } finally {
    rmSync(node.dataDir, { recursive: true, force: true });
  }
  return points;
}

const results: { tree: string; points: Point[] }[] = [];
for (const tree of trees()) results.push({ tree: tree.name, points: await measure(tree) });

console.log(
  `\nSQLite, serving TLS edges, no traffic; idle over ${IDLE_S} s after ${SETTLE_MS / 1000} s; ` +
    `${CREATE} edges created through the API at each size\n`,
);
console.log(
  '| tree | edges in store | start to API up (ms) | CPU of the start (ms) | idle CPU (ms/s) | RSS idle (MiB) | ' +
    'edges created per s | POST /reserved_domains (ms) | POST /edges/tls (ms) |',
);
console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|');
for (const { tree, points } of results) {
  for (const p of points) {
    console.log(
      `| ${tree} | ${p.edges.toLocaleString('en')} | ${p.restartMs.toFixed(0)} | ` +
        `${p.startCpuMs.toFixed(0)} | ` +
        `${p.idleMsPerS.toFixed(1)} | ${p.rssMiB.toFixed(0)} | ${p.createPerS.toFixed(1)} | ` +
        `${p.domainMs.toFixed(1)} | ${p.edgeMs.toFixed(1)} |`,
    );
  }
}
