/**
 * Soak (issue 36): a real `burrow server` process under SOAK_SECONDS (default 600) of churn, its
 * RSS, V8 heap (after a full GC) and open descriptors printed every SAMPLE_SECONDS. WORKERS Burrow
 * SDK sessions each loop: bind an HTTP endpoint with a traffic policy (one of a few, and every
 * tenth bind a policy of its own), send it visitors (some answered, some that hang up while the
 * agent is still working on /slow), unbind; every twentieth cycle the session is closed and a new
 * one opened. What the edge holds must stay flat: nothing a cycle leaves may add up.
 *
 *   npm run build && npm run bench:soak
 *   SOAK_SECONDS=180 WORKERS=4 npm run bench:soak
 */
import { readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Session } from '../src/sdk/index.js';
import { visit } from '../test/support/ingress.js';
import { startEdgeServer, type EdgeServer } from './edge-process.js';
import { fmt, machine, markdownTable, mib } from './report.js';
import { exitOnSignals } from './support/roles.js';
import { connectAgent, edgeAddress, type EdgeAddress } from './support/sdk-agent.js';

const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const SAMPLE_SECONDS = Number(process.env.SAMPLE_SECONDS ?? 30);
const WORKERS = Number(process.env.WORKERS ?? 4);
/** Visitors per bound endpoint: this many answered, this many who hang up. */
const VISITS = 3;
const HANG_UPS = 2;

/** A policy of ~20 KB: 20 rules, each answering its own path with a 1 KB body. */
function policy(tag: string): string {
  const rules = Array.from(
    { length: 20 },
    (_, i) =>
      `  - name: r${i}\n    expressions: ["req.url.path == '/p${i}'"]\n    actions: [{type: custom-response, config: {status_code: 200, body: "${tag}${'b'.repeat(1000)}"}}]\n`,
  );
  return `on_http_request:\n${rules.join('')}`;
}
const SHARED_POLICIES = ['a', 'b', 'c'].map(policy);

/** The agent's service: /slow answers after 3 s (visitors hang up first), the rest at once. */
function service(req: IncomingMessage, res: ServerResponse): void {
  if (req.url === '/slow') {
    const timer = setTimeout(() => res.end('late'), 3000);
    res.on('close', () => clearTimeout(timer));
  } else res.end('ok');
}

/** One worker's loop until `deadline`; counts cycles and failures into `totals`. */
async function churn(
  edge: EdgeServer,
  spec: EdgeAddress,
  worker: number,
  deadline: number,
  totals: { cycles: number; failures: number },
): Promise<void> {
  let session: Session | undefined;
  for (let cycle = 0; Date.now() < deadline; cycle++) {
    try {
      if (!session || cycle % 20 === 0) {
        await session?.close();
        session = await connectAgent(spec, { reconnect: false });
      }
      const own = cycle % 10 === 9;
      const endpoint = await session.httpEndpoint({
        scheme: 'http',
        forward: service,
        trafficPolicy: own ? policy(`w${worker}c${cycle}`) : SHARED_POLICIES[cycle % 3],
      });
      const host = new URL(endpoint.url!).hostname;
      await Promise.all([
        ...Array.from({ length: VISITS }, (_, i) =>
          visit(edge.httpPort, host, i === 0 ? '/p1' : '/'),
        ),
        // These hang up before /slow answers.
        ...Array.from({ length: HANG_UPS }, () =>
          visit(edge.httpPort, host, '/slow', delay(200, undefined, { ref: false })),
        ),
      ]);
      await endpoint.close();
      totals.cycles++;
    } catch (err) {
      totals.failures++;
      if (totals.failures <= 5) console.error(`worker ${worker}: ${(err as Error).message}`);
      await session?.close().catch(() => undefined);
      session = undefined;
    }
  }
  await session?.close();
}

/** Open descriptors of process `pid`. */
function descriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

async function main(): Promise<void> {
  const load = loadavg()[0]!.toFixed(1);
  const edge = await startEdgeServer();
  const spec = await edgeAddress(edge);
  const started = Date.now();
  const deadline = started + SOAK_SECONDS * 1000;
  const totals = { cycles: 0, failures: 0 };
  const rows: string[][] = [];
  const sample = async (label: string): Promise<void> => {
    const memory = await edge.gcMemory();
    const row = [
      label,
      String(totals.cycles),
      mib(memory.rss),
      mib(memory.heapUsed),
      mib(memory.external),
      String(descriptors(edge.pid)),
    ];
    rows.push(row);
    console.log(row.join('\t'));
  };
  await sample('0 s');
  const workers = Array.from({ length: WORKERS }, (_, w) => churn(edge, spec, w, deadline, totals));
  const sampler = setInterval(
    () => void sample(`${Math.round((Date.now() - started) / 1000)} s`),
    SAMPLE_SECONDS * 1000,
  );
  await Promise.all(workers);
  clearInterval(sampler);
  // The last sessions are closed; what the edge still holds after a moment is what leaked.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  await sample('end + 5 s');
  await edge.stop();

  const seconds = (Date.now() - started) / 1000;
  console.log(
    `\nSoak: ${fmt(seconds)} s of churn, ${WORKERS} SDK sessions (each re-opened every 20 cycles), ` +
      `${totals.cycles} bind/visit/unbind cycles (${fmt(totals.cycles / seconds, 1)} per s), ` +
      `${totals.failures} failed; ${VISITS} answered visitors and ${HANG_UPS} who hang up per ` +
      `cycle; ${machine()}, load average ${load} at the start.\n`,
  );
  console.log(
    markdownTable(
      ['time', 'cycles', 'RSS (after GC)', 'V8 heap used', 'external', 'open descriptors'],
      rows,
    ),
  );
}

exitOnSignals();
await main();
