/**
 * `wrk` as the benchmarks run it: one thread against `http://127.0.0.1:<port>/`, its summary read
 * back as JSON through a report script (written once per process, removed at exit).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const REPORT = `done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"us":%d,"errors":%d,"non2xx":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
`;

let reportScript: string | undefined;

function script(): string {
  if (reportScript) return reportScript;
  const dir = mkdtempSync(join(tmpdir(), 'burrow-wrk-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  reportScript = join(dir, 'report.lua');
  writeFileSync(reportScript, REPORT);
  return reportScript;
}

/** What one run of wrk did. */
export interface WrkResult {
  requests: number;
  /** Requests per second. */
  rate: number;
  /** Socket errors and timeouts plus answers other than 2xx/3xx. */
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Run wrk for `seconds` with `connections` against `port`, naming `host` in every request; with
 * `close`, each request on a new connection (`Connection: close`).
 * @example const { rate } = await wrk({ port, host: 'localhost', connections: 50, seconds: 4 });
 */
export async function wrk(spec: {
  port: number;
  host: string;
  connections: number;
  seconds: number;
  close?: boolean;
}): Promise<WrkResult> {
  const args = ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, '-s', script()];
  args.push('-H', `Host: ${spec.host}`);
  if (spec.close) args.push('-H', 'Connection: close');
  const { stdout } = await promisify(execFile)('wrk', [...args, `http://127.0.0.1:${spec.port}/`]);
  const r = JSON.parse(stdout.slice(stdout.lastIndexOf('{'))) as Record<string, number>;
  return {
    requests: r.requests!,
    rate: r.requests! / (r.us! / 1e6),
    errors: r.errors! + r.non2xx!,
    p50Ms: r.p50! / 1000,
    p99Ms: r.p99! / 1000,
  };
}
