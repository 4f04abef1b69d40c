/**
 * Traffic policy micro-benchmark: evaluations per second of the engine alone (no sockets), for
 *   - the 10-rule HTTP policy of the tests (every rule evaluated, nothing refused),
 *   - the same policy's response phase,
 *   - the TLS-edge sample on_tcp_connect, for a TLS 1.2 client (passes) and a TLS 1.3 client
 *     (logged and denied, so two events are recorded),
 *   - compiling the 10-rule policy from text (the cache bypassed).
 *
 *   node --import tsx bench/policy-eval.ts [--seconds 1] [--rounds 5]
 *
 * Each case runs `rounds` times for `seconds`; the table shows the median round.
 */
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { compileDocument, compilePolicy, PolicyEventLog } from '../src/policy/index.js';
import { parsePolicyDocument } from '../src/policy/parse.js';
import type { RequestInput } from '../src/policy/variables.js';
import {
  CONN_TLS12,
  CONN_TLS13,
  SAMPLE_RESPONSE,
  TEN_RULE_HTTP_POLICY,
  TLS_SAMPLE_POLICY,
} from '../test/support/policy-fixtures.js';
import { fmt, markdownTable } from './report.js';

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '5' },
  },
});
const SECONDS = Number(opts.seconds);
const ROUNDS = Number(opts.rounds);

/** Calls per second of `fn`: the median of ROUNDS timed rounds, after a warm-up. */
function measure(fn: () => unknown): number {
  const deadline = performance.now() + 300;
  while (performance.now() < deadline) for (let i = 0; i < 100; i++) fn();
  const rates: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    let calls = 0;
    const start = performance.now();
    const end = start + SECONDS * 1000;
    let now = start;
    while (now < end) {
      for (let i = 0; i < 200; i++) fn();
      calls += 200;
      now = performance.now();
    }
    rates.push(calls / ((now - start) / 1000));
  }
  rates.sort((a, b) => a - b);
  return rates[Math.floor(rates.length / 2)]!;
}

function settled<T>(value: T | Promise<T>): T {
  if (value instanceof Promise) throw new Error('the benchmark expects synchronous decisions');
  return value;
}

const events = new PolicyEventLog();
const http = compilePolicy(TEN_RULE_HTTP_POLICY, { protocol: 'http' }).bind({
  ownerId: 'ep_bench',
  events,
});
const tls = compilePolicy(TLS_SAMPLE_POLICY, { protocol: 'tls' }).bind({
  ownerId: 'edgtls_bench',
  events,
});

/** A request every rule looks at and none refuses. */
const REQUEST: RequestInput = {
  method: 'GET',
  url: '/api/v1/users/42?page=2',
  scheme: 'https',
  headers: {
    host: 'app.example.com',
    'user-agent': 'Mozilla/5.0 (X11; Linux x86_64)',
    accept: 'application/json',
    'accept-encoding': 'gzip, br',
  },
};

// Check once that each case does what its name says before timing it.
const sample = settled(http.onHttpRequest({ conn: CONN_TLS13, req: REQUEST }));
if (sample.kind !== 'continue' || sample.rewrite !== '/api/v2/users/42?page=2') {
  throw new Error(`unexpected decision for the 10-rule policy: ${JSON.stringify(sample)}`);
}
if (settled(tls.onTcpConnect({ conn: CONN_TLS12 })).kind !== 'continue') throw new Error('TLS 1.2');
if (settled(tls.onTcpConnect({ conn: CONN_TLS13 })).kind !== 'close') throw new Error('TLS 1.3');

const tenRuleDoc = TEN_RULE_HTTP_POLICY;
const cases: Array<[string, () => unknown]> = [
  [
    '10-rule policy, on_http_request (passes)',
    () => http.onHttpRequest({ conn: CONN_TLS13, req: REQUEST }),
  ],
  [
    '10-rule policy, on_http_response',
    () => http.onHttpResponse({ conn: CONN_TLS13, req: REQUEST, res: SAMPLE_RESPONSE }),
  ],
  ['TLS sample, on_tcp_connect, TLS 1.2 (passes)', () => tls.onTcpConnect({ conn: CONN_TLS12 })],
  [
    'TLS sample, on_tcp_connect, TLS 1.3 (log + deny)',
    () => tls.onTcpConnect({ conn: CONN_TLS13 }),
  ],
  [
    'compile the 10-rule policy (uncached)',
    () => compileDocument(parsePolicyDocument(tenRuleDoc, 'bench'), { protocol: 'http' }),
  ],
];

const rows = cases.map(([name, fn]) => {
  const rate = measure(fn);
  return [name, fmt(rate), fmt(1e9 / rate)];
});

console.log(
  `Node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}; median of ${ROUNDS} rounds of ${SECONDS}s\n`,
);
console.log(markdownTable(['case', 'evaluations/s', 'ns/evaluation'], rows));
