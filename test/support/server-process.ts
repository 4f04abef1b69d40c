import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestDatabase } from './stores.js';

/**
 * The real `burrow` command as a child process: what the end-to-end tests and the benchmark drive.
 * It runs the compiled CLI (`bin/burrow.js` over `dist/`), so `npm run build` must have run;
 * `npm test` does that first.
 */

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BURROW_BIN = join(REPO_ROOT, 'bin', 'burrow.js');

/** The settings every end-to-end server runs with, matching the unit tests' store settings. */
export const E2E_SETTINGS = {
  baseDomain: 'burrow.test',
  tcpHost: 'tcp.burrow.test',
  tcpPorts: '20000-20999',
  httpsPort: 8443,
} as const;

function assertBuilt(): void {
  if (!existsSync(join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` before the end-to-end tests');
  }
}

/** The flags that point a CLI command at `db`: its data folder, and the URL for PostgreSQL. */
export function databaseArgs(db: Pick<TestDatabase, 'dataDir' | 'database'>): string[] {
  return db.database
    ? ['--data-dir', db.dataDir, '--database', db.database]
    : ['--data-dir', db.dataDir];
}

/** What a finished CLI command did. */
export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `burrow <args>` to completion, in `options.cwd` (default the repository) with
 * `options.env` added to the environment and `options.input` on its stdin (empty when absent).
 * @example const { stdout } = await runBurrow(['api-key', 'create', '--data-dir', dir]);
 * @example await runBurrow(['user', 'add', 'ada', '--data-dir', dir], undefined, { input: 'a password\n' });
 */
export async function runBurrow(
  args: string[],
  timeoutMs = 20_000,
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<CliResult> {
  assertBuilt();
  const child = spawn(process.execPath, [BURROW_BIN, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...cleanEnv(), ...options.env },
  });
  // Without input, stdin ends at once: a command that reads it gets end of file.
  child.stdin.end(options.input);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await exited(child);
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}

/** Create an API key with `burrow api-key create` and return its token (the CLI's stdout). */
export async function createApiKey(
  db: Pick<TestDatabase, 'dataDir' | 'database'>,
): Promise<string> {
  const res = await runBurrow(['api-key', 'create', ...databaseArgs(db), '--description', 'e2e']);
  const token = res.stdout.trim();
  if (res.code !== 0 || !/^\S+$/.test(token)) {
    throw new Error(`burrow api-key create failed (exit ${res.code}): ${res.stderr}${res.stdout}`);
  }
  return token;
}

/** The environment without BURROW_* variables, so a developer's own settings cannot leak in. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BURROW_')) env[k] = v;
  return env;
}

/** The exit code and signal, once the process has ended and its stdout and stderr are fully read. */
function exited(child: ChildProcess): Promise<[number | null, NodeJS.Signals | null]> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve([child.exitCode, child.signalCode]);
  }
  return new Promise((resolve) =>
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) =>
      resolve([code, signal]),
    ),
  );
}

/**
 * Where `freePort` looks: above Linux's ephemeral ports (`ip_local_port_range`, 32768-60999 by
 * default), where no client socket lands. A port the OS picked in the ephemeral range could be
 * taken by any outgoing connection of a test running in parallel before its server bound it
 * (CI failed so, with EADDRINUSE); ports above the range are only ever taken by a listener.
 */
const FREE_PORT_REGION = ((): { from: number; to: number } | undefined => {
  try {
    const [, last] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (last !== undefined && last + 1000 <= 65536) return { from: last + 1, to: 65536 };
  } catch {
    // Not Linux: let the OS pick.
  }
  return undefined;
})();

/** Whether a listener can bind `port` on 127.0.0.1 now (the listener is closed again at once). */
function probe(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      const bound = typeof addr === 'object' && addr ? addr.port : undefined;
      srv.close(() => resolve(bound));
    });
  });
}

/**
 * Ports this process has handed out. A port is free again once its probe closes, so without this
 * two calls made before the first port is bound (`freeEdgePorts` makes three, then the server's
 * API port) could return the same one, and the server then fails with EADDRINUSE (CI did, once).
 */
const handedOut = new Set<number>();

/**
 * A port that was free a moment ago, chosen at random above the ephemeral range (see
 * FREE_PORT_REGION) and probed with a real listener, and never one this process was given before;
 * where there is no such region, the OS picks.
 */
export async function freePort(): Promise<number> {
  const region = FREE_PORT_REGION;
  for (let attempt = 0; region && attempt < 50; attempt++) {
    const pick = region.from + Math.floor(Math.random() * (region.to - region.from));
    if (handedOut.has(pick)) continue;
    const port = await probe(pick);
    if (port === undefined) continue;
    handedOut.add(port);
    return port;
  }
  const port = await probe(0);
  if (port === undefined) throw new Error('no free port on 127.0.0.1');
  return port;
}

/** True once `GET http://<address>/healthz` answers 200; false after `timeoutMs` or once `child` exits. */
async function waitForHealth(
  address: string,
  timeoutMs: number,
  child: ChildProcess,
): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until && child.exitCode === null && child.signalCode === null) {
    try {
      const res = await fetch(`http://${address}/healthz`);
      if (res.ok) return true;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** One JSON log line of the server. */
export interface LogLine {
  level: number;
  msg?: string;
  [key: string]: unknown;
}

/** A running `burrow server`. */
export interface BurrowServer {
  /** Base URL of the API, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** The `address` of the "API listening" log line. */
  address: string;
  process: ChildProcess;
  logs: LogLine[];
  /** Everything written to stdout so far, log lines or not (empty with `discardLogs`). */
  stdout(): string;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** SIGTERM, then wait for the exit; resolves with the exit code (SIGKILL after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<number | null>;
}

export interface StartOptions {
  /** Flags added after the defaults (later flags win in commander). */
  args?: string[];
  /** Milliseconds to wait for the server to be ready. */
  timeoutMs?: number;
  /**
   * Discard stdout and wait for `GET /healthz` instead of the "API listening" line: for the
   * benchmark, where reading and keeping every log line would cost the measuring process.
   */
  discardLogs?: boolean;
  /** The folder the server runs in (default the repository), for a relative `--data-dir`. */
  cwd?: string;
  /**
   * The log message that says the server is ready (default "API listening"); a server without
   * an API (`--role edge`) is ready at "cluster node joined". `address` is then ''.
   */
  readyMessage?: string;
  /**
   * Run the server under this open-files limit (soft and hard, with util-linux `prlimit`), for
   * tests of what a flood does to a process at its descriptor limit.
   */
  openFilesLimit?: number;
  /** Flags for node itself, before the script (e.g. `--max-old-space-size=160`). */
  nodeFlags?: string[];
  /**
   * Run this `burrow` executable instead of `node bin/burrow.js` (an installed copy, found on
   * `env.PATH` when it is a bare name), with `env` added to the environment.
   */
  bin?: { command: string; env: NodeJS.ProcessEnv };
}

/**
 * Start `burrow server --role api` on `db` with the API on a free loopback port, and wait until it
 * logs "API listening". `--role api` keeps the edge's fixed ports (agent, HTTP, HTTPS ingress)
 * closed so that several servers can run side by side; `--https-listen` still defaults to 8443,
 * the port TLS edge hostports must use.
 * @example const server = await startBurrowServer(db); await server.stop();
 */
export async function startBurrowServer(
  db: Pick<TestDatabase, 'dataDir' | 'database'>,
  options: StartOptions = {},
): Promise<BurrowServer> {
  if (!options.bin) assertBuilt();
  // The port is chosen here rather than with --api-listen :0 so that --public-api-url (and with
  // it every `uri` field) names the real port. Another process may grab it in between; retry.
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await launch(db, port, options);
    } catch (err) {
      lastError = err as Error;
      if (!/EADDRINUSE/.test(lastError.message)) throw lastError;
    }
  }
  throw lastError!;
}

async function launch(
  db: Pick<TestDatabase, 'dataDir' | 'database'>,
  port: number,
  options: StartOptions,
): Promise<BurrowServer> {
  const args = [
    BURROW_BIN,
    'server',
    ...databaseArgs(db),
    '--role',
    'api',
    '--api-listen',
    `127.0.0.1:${port}`,
    '--log-level',
    'info',
    '--base-domain',
    E2E_SETTINGS.baseDomain,
    '--tcp-host',
    E2E_SETTINGS.tcpHost,
    '--tcp-ports',
    E2E_SETTINGS.tcpPorts,
    ...(options.args ?? []),
  ];
  const limit = options.openFilesLimit;
  const nodeArgs = [...(options.nodeFlags ?? []), ...args];
  const [command, commandArgs] = options.bin
    ? [options.bin.command, args.slice(1)]
    : limit === undefined
      ? [process.execPath, nodeArgs]
      : ['prlimit', [`--nofile=${limit}:${limit}`, process.execPath, ...nodeArgs]];
  const child = spawn(command, commandArgs, {
    cwd: options.cwd ?? REPO_ROOT,
    stdio: ['ignore', options.discardLogs ? 'ignore' : 'pipe', 'pipe'],
    env: { ...cleanEnv(), ...options.bin?.env },
  });
  const logs: LogLine[] = [];
  let stderr = '';
  let stdout = '';
  let pending = '';
  let onLine: ((line: LogLine) => void) | undefined;
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const text = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        const line = JSON.parse(text) as LogLine;
        logs.push(line);
        onLine?.(line);
      } catch {
        // Not every stdout line has to be a log line; only log lines matter here.
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exit = exited(child);

  const timeoutMs = options.timeoutMs ?? 20_000;
  const ready = options.readyMessage ?? 'API listening';
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`burrow server did not log "${ready}" in ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    onLine = (line) => {
      if (line.msg === ready) {
        clearTimeout(timer);
        resolve(typeof line.address === 'string' ? line.address : '');
      }
    };
    const early = logs.find((l) => l.msg === ready);
    if (early) onLine(early);
    if (options.discardLogs) {
      void waitForHealth(`127.0.0.1:${port}`, timeoutMs, child).then((healthy) => {
        if (!healthy) return;
        clearTimeout(timer);
        resolve(`127.0.0.1:${port}`);
      });
    }
    void exit.then(([code, signal]) => {
      clearTimeout(timer);
      const lastLog = logs.map((l) => JSON.stringify(l)).join('\n');
      reject(
        new Error(
          `burrow server exited (code ${code}, signal ${signal}) before listening: ${stderr}\n${lastLog}`,
        ),
      );
    });
  });

  let stopped: Promise<number | null> | undefined;
  return {
    url: `http://${address}`,
    address,
    process: child,
    logs,
    stdout: () => stdout,
    stderr: () => stderr,
    stop(stopTimeoutMs = 10_000) {
      stopped ??= (async () => {
        const timer = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs);
        child.kill('SIGTERM');
        const [code] = await exit;
        clearTimeout(timer);
        return code;
      })();
      return stopped;
    },
  };
}

/** A `burrow` command running in a child process, with what it printed so far. */
export interface RunningBurrow {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  exit: Promise<number | null>;
}

/**
 * Run the built `burrow` with `args` in `cwd` (no BURROW_* from this environment, `env` on top),
 * keeping its output; the test kills or awaits it.
 * @example const run = spawnBurrow(['http', '3000', '--server', addr], { BURROW_AUTHTOKEN: token });
 */
export function spawnBurrow(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd: string = REPO_ROOT,
): RunningBurrow {
  assertBuilt();
  const child = spawn(process.execPath, [BURROW_BIN, ...args], {
    cwd,
    env: { ...cleanEnv(), ...env },
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return { child, stdout: () => out, stderr: () => err, exit };
}
