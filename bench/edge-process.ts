/**
 * A real `burrow server` process (the compiled CLI, API and edge) for the end-to-end benchmarks,
 * started so that it can be measured from outside: its pid for /proc (RSS, CPU time), a full
 * garbage collection on SIGUSR2 that reports `process.memoryUsage()` on stderr, and optionally
 * `--cpu-prof`, whose profile is written when the process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BURROW_BIN, createApiKey, freePort, REPO_ROOT } from '../test/support/server-process.js';

/** Loaded with --import: SIGUSR2 runs a full GC and prints the memory figures as one JSON line. */
const GC_ON_SIGNAL =
  'data:text/javascript,' +
  encodeURIComponent(
    "process.on('SIGUSR2', () => { globalThis.gc(); globalThis.gc(); " +
      "process.stderr.write('@memory ' + JSON.stringify(process.memoryUsage()) + '\\n'); });",
  );

/** `process.memoryUsage()` of the server after a full GC. */
export interface ServerMemory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export interface EdgeServer {
  pid: number;
  apiUrl: string;
  agentAddr: string;
  httpPort: number;
  httpsPort: number;
  caFile: string;
  /** A new authtoken (credential) created through the API. */
  token(): Promise<string>;
  /** An API key for other API calls (Bearer). */
  apiKey: string;
  /** Resident set size now, from /proc (no GC). */
  rss(): number;
  /** User + system CPU time the process has used so far, in ms. */
  cpuMs(): number;
  /** Full GC in the server, then its memory figures. */
  gcMemory(): Promise<ServerMemory>;
  /** SIGTERM and wait for the exit; with `cpuProfile`, the path of the written profile. */
  stop(): Promise<string | undefined>;
}

const CLOCK_TICKS_PER_S = 100;

/**
 * CPU time (user + system, ms) of process `pid`, from /proc/<pid>/stat.
 * @example const before = processCpuMs(pid);
 */
/**
 * A new authtoken from the API at `apiUrl` (POST /credentials with `apiKey`).
 * @example const token = await createAuthtoken('http://127.0.0.1:4000', key);
 */
export async function createAuthtoken(apiUrl: string, apiKey: string): Promise<string> {
  const res = await fetch(`${apiUrl}/credentials`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${apiKey}`,
      'Service-Version': '2',
      'Content-Type': 'application/json',
    },
    body: '{}',
  });
  const body = (await res.json()) as { token?: string };
  if (!body.token) throw new Error(`could not create a credential: ${JSON.stringify(body)}`);
  return body.token;
}

export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

/**
 * Resident set size of process `pid` in bytes, from /proc/<pid>/status.
 * @example processRss(edge.pid) / 2 ** 20 // MiB
 */
export function processRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  return m ? Number(m[1]) * 1024 : NaN;
}

/**
 * Start `burrow server --role all` on SQLite in a temp folder, on free loopback ports.
 * @example const edge = await startEdgeServer(); ... await edge.stop();
 */
export async function startEdgeServer(
  options: {
    cpuProfile?: boolean;
    logLevel?: string;
    /** A built tree other than this one (its `bin/` and `dist/`), for before/after runs. */
    root?: string;
    /** More `burrow server` arguments, e.g. a limit. */
    args?: string[];
    /** More environment for the server process, e.g. LD_PRELOAD or MALLOC_ARENA_MAX. */
    env?: Record<string, string>;
  } = {},
): Promise<EdgeServer> {
  const root = options.root ?? REPO_ROOT;
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-edge-'));
  const profileDir = join(dataDir, 'profile');
  const ports = {
    api: await freePort(),
    agent: await freePort(),
    http: await freePort(),
    https: await freePort(),
  };
  const nodeArgs = ['--expose-gc', '--import', GC_ON_SIGNAL];
  if (options.cpuProfile) nodeArgs.push('--cpu-prof', '--cpu-prof-dir', profileDir);
  // For experiments, e.g. EDGE_NODE_ARGS='--trace-gc --max-semi-space-size=16'.
  nodeArgs.push(...(process.env.EDGE_NODE_ARGS?.split(' ').filter(Boolean) ?? []));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...nodeArgs,
      options.root ? join(root, 'bin', 'burrow.js') : BURROW_BIN,
      'server',
      ...['--data-dir', dataDir, '--role', 'all', '--log-level', options.logLevel ?? 'warn'],
      ...['--api-listen', `127.0.0.1:${ports.api}`, '--api-rate-limit', '0'],
      ...['--agent-listen', `127.0.0.1:${ports.agent}`],
      ...['--http-listen', `127.0.0.1:${ports.http}`],
      ...['--https-listen', `127.0.0.1:${ports.https}`],
      ...['--base-domain', 'burrow.test', '--tcp-host', 'tcp.burrow.test'],
      ...(options.args ?? []),
    ],
    {
      cwd: root,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', process.env.EDGE_STDOUT ? 'inherit' : 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  const memoryWaiters: ((m: ServerMemory) => void)[] = [];
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    let at: number;
    while ((at = stderr.indexOf('@memory ')) >= 0) {
      const end = stderr.indexOf('\n', at);
      if (end < 0) break;
      const memory = JSON.parse(stderr.slice(at + 8, end)) as ServerMemory;
      stderr = stderr.slice(0, at) + stderr.slice(end + 1);
      memoryWaiters.shift()?.(memory);
    }
  });
  const exited = once(child, 'exit');
  // Never leave a server behind when the benchmark dies (Ctrl-C, a failure, a timeout).
  const killOnExit = (): void => {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  };
  process.once('exit', killOnExit);
  const apiUrl = `http://127.0.0.1:${ports.api}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`burrow server exited: ${stderr}`);
    if (i > 400) throw new Error(`burrow server did not start: ${stderr}`);
    const up = await fetch(`${apiUrl}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const apiKey = await createApiKey({ dataDir, database: '' });
  const pid = child.pid!;
  return {
    pid,
    apiUrl,
    agentAddr: `127.0.0.1:${ports.agent}`,
    httpPort: ports.http,
    httpsPort: ports.https,
    caFile: join(dataDir, 'ca.pem'),
    token: () => createAuthtoken(apiUrl, apiKey),
    apiKey,
    rss: () => processRss(pid),
    cpuMs: () => processCpuMs(pid),
    gcMemory() {
      const reply = new Promise<ServerMemory>((resolve) => memoryWaiters.push(resolve));
      child.kill('SIGUSR2');
      return reply;
    },
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
      process.off('exit', killOnExit);
      let profile: string | undefined;
      if (options.cpuProfile) {
        const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
        if (file) {
          profile = join(tmpdir(), `burrow-edge-${Date.now()}.cpuprofile`);
          copyFileSync(join(profileDir, file), profile);
        }
      }
      rmSync(dataDir, { recursive: true, force: true });
      return profile;
    },
  };
}
